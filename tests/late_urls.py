"""A URLconf whose views' module registers jobs (``tests.late_jobs``), as many projects' do.

``tests/checks/test_checks.py`` points ``ROOT_URLCONF`` here: the check loads the URLconf
itself, so it sees those jobs whatever order Django runs the checks in.
"""

from __future__ import annotations

from . import late_jobs  # noqa: F401  (the views' module, and its jobs)

urlpatterns: list = []
