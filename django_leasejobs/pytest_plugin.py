"""The pytest plugin (entry point ``pytest11``): the ``leasejobs`` and ``leasejobs_worker``
fixtures.

Loaded by every pytest run in an environment where django-leasejobs is installed, so it
defines nothing unless pytest-django is installed too, and imports the app's models only when a
fixture is used (pytest loads plugins before Django is set up).
"""

from __future__ import annotations

from typing import Any

import pytest

try:
    import pytest_django  # noqa: F401  (itself a pytest plugin: loaded anyway when installed)
except ImportError:
    HAS_PYTEST_DJANGO = False
else:
    HAS_PYTEST_DJANGO = True

if HAS_PYTEST_DJANGO:

    @pytest.fixture
    def leasejobs(db: None) -> Any:
        """``django_leasejobs.testing``: assert_enqueued, capture_jobs, run_job, drain, ..."""
        from django_leasejobs import testing

        return testing

    @pytest.fixture
    def leasejobs_worker(transactional_db: None) -> Any:
        """A ``BurstWorker``: ``.run()`` runs a burst ``Worker`` on the test database.

        Its pool threads have their own connections, so the test runs with
        ``transaction=True`` (committed rows); ``drain()`` is the helper inside a transaction.
        """
        from django_leasejobs.testing import BurstWorker

        return BurstWorker()
