"""The pytest plugin (entry point ``pytest11``): the ``leasejobs`` and ``leasejobs_worker``
fixtures.

Loaded by every pytest run in an environment where django-leasejobs is installed, so it
defines nothing unless pytest-django is installed too, and imports the app's models only when a
fixture is used (pytest loads plugins before Django is set up).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("pytest_django") is not None:

    @pytest.fixture
    def leasejobs(db: None) -> Any:
        """``django_leasejobs.testing``: assert_enqueued, capture_jobs, run_job, drain, ..."""
        from django_leasejobs import testing

        return testing

    @pytest.fixture
    def leasejobs_worker(transactional_db: None) -> Iterator[Any]:
        """A ``Worker`` for ``.run(burst=True)``, bound to the test database.

        Its pool threads have their own connections, so the test runs with
        ``transaction=True`` (committed rows) and ``drain()`` is the helper for ``TestCase``.
        """
        from django.db import connections

        from django_leasejobs.runtime.worker import Worker

        yield Worker(concurrency=2, lease=5.0, heartbeat=0.5, poll=0.05)
        for connection in connections.all(initialized_only=True):
            connection.close_if_unusable_or_obsolete()
