"""Helpers for testing code that enqueues jobs, and the jobs themselves (``docs/testing.md``).

``assert_enqueued`` / ``refute_enqueued`` / ``enqueued`` look at waiting jobs (scoped by
``capture_jobs()``); ``run_job`` runs one handler as a worker would; ``drain`` runs due jobs in
the test's own thread and transaction; ``travel`` makes later jobs due without sleeping.
The pytest plugin (``django_leasejobs.pytest_plugin``) offers them as the ``leasejobs`` fixture.
"""

from ..runtime.inprocess import JobFailedError
from .matching import Captured, assert_enqueued, capture_jobs, enqueued, refute_enqueued
from .running import BurstWorker, DrainSummary, drain, run_job, travel

__all__ = [
    "BurstWorker",
    "Captured",
    "DrainSummary",
    "JobFailedError",
    "assert_enqueued",
    "capture_jobs",
    "drain",
    "enqueued",
    "refute_enqueued",
    "run_job",
    "travel",
]
