"""A worker wakes deferred jobs it can run only by importing their module, at its start.

``tests.late_jobs`` stands for a module of the new release that nothing imports at start (a job
outside ``jobs.py``): an old worker deferred a job of it, and a worker that may import it
(``LEASEJOBS_TASK_MODULES``) runs it when it starts, not when the deferral's delay runs out.
"""

from __future__ import annotations

import datetime as dt
import sys

import pytest
from django.db.models import F

from django_leasejobs import protocol
from django_leasejobs.models import Job, Status
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.runtime.deferred_names import DeferredNames
from django_leasejobs.runtime.worker import Worker

from ..conftest import shifted

pytestmark = pytest.mark.django_db(transaction=True)

UNKNOWN = Failure("No job is registered as it; it was not run.", kind="unregistered job")


def deferred_an_hour(name: str, *args: object) -> Job:
    """A job an old worker deferred, its next try an hour ahead: only a wake-up makes it due."""
    Job.objects.create(name=name, args=list(args))
    (job,) = protocol.claim("old-worker", batch=1)
    outcome = protocol.defer(
        job.pk,
        job.attempt,
        UNKNOWN,
        deferrals=0,
        grace=dt.timedelta(hours=1),
        worker_id="old-worker",
        reason="not registered",
    )
    assert outcome is Outcome.RELEASED
    Job.objects.filter(pk=job.pk).update(run_at=shifted(3600))
    Job.objects.filter(pk=job.pk).update(deferred_until=F("run_at"))
    return job


def test_a_worker_imports_a_deferred_jobs_module_and_runs_it_at_start(
    settings, late_jobs: str
) -> None:
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]
    job = deferred_an_hour(f"{late_jobs}.late_report", "monday")
    Worker(concurrency=1, poll=0.05, scheduler=False).run(burst=True)
    job.refresh_from_db()
    assert (job.status, job.result) == (Status.SUCCEEDED, "report for monday")


def test_a_module_a_worker_may_not_import_stays_unimported_and_the_job_waits(
    late_jobs: str,
) -> None:
    job = deferred_an_hour(f"{late_jobs}.late_report", "monday")
    Worker(concurrency=1, poll=0.05, scheduler=False).run(burst=True)
    assert late_jobs not in sys.modules
    job.refresh_from_db()
    assert (job.status, job.deferrals) == (Status.PENDING, 1)


def test_each_name_is_looked_for_once_and_at_most_every_few_seconds(
    settings, late_jobs: str
) -> None:
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]
    deferred_an_hour("shop.absent.job")
    names = DeferredNames(every=5)
    assert names.import_waiting(100.0) == []  # looked for: not importable
    deferred_an_hour(f"{late_jobs}.late_report", "monday")
    assert names.import_waiting(104.0) == []  # too soon
    assert late_jobs not in sys.modules
    assert names.import_waiting(105.0) == [f"{late_jobs}.late_report"]
    assert names.import_waiting(110.0) == []  # registered now; the other was tried


def test_deferred_names_lists_the_waiting_names_once_each() -> None:
    deferred_an_hour("b.job")
    deferred_an_hour("a.job")
    deferred_an_hour("a.job")
    assert protocol.deferred_names() == ["a.job", "b.job"]
    Job.objects.filter(name="b.job").update(run_at=shifted(7200))  # an operator moved it
    assert protocol.deferred_names() == ["a.job"]
