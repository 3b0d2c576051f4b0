"""A ``django.tasks`` task raises ``Retry`` or ``Snooze`` as a job's handler does."""

from __future__ import annotations

import pytest
from testapp import retry_jobs

from django_leasejobs.models import Job, Status
from django_leasejobs.testing import drain, travel

from ..invariants import check_invariants

pytestmark = pytest.mark.django_db

if retry_jobs.task is None:  # pragma: no cover - the tasks extra is in the dev environment
    pytest.skip("needs django.tasks or the django-tasks backport", allow_module_level=True)


def test_a_task_retries_at_its_time_and_is_charged() -> None:
    result = retry_jobs.task_retry_once.enqueue(900)
    assert drain().retried == 1
    job = Job.objects.get(pk=int(result.id))
    assert (job.status, job.errors[0]["kind"]) == (Status.FAILED, "retry requested")
    assert job.errors[0]["error"].startswith("django_leasejobs.retries.Retry: the handler asked")
    travel(900)
    assert drain().succeeded == 1
    job.refresh_from_db()
    assert (job.status, job.attempt, job.released, job.result) == (
        Status.SUCCEEDED,
        2,
        0,
        "done on attempt 2",
    )


def test_a_task_snoozes_without_spending_an_attempt() -> None:
    result = retry_jobs.task_snooze_once.using(max_attempts=1).enqueue(900)
    assert drain().snoozed == 1
    job = Job.objects.get(pk=int(result.id))
    assert (job.status, job.snoozes, job.errors) == (Status.PENDING, 1, [])
    travel(900)
    assert drain().succeeded == 1
    job.refresh_from_db()
    assert (job.status, job.attempt, job.released) == (Status.SUCCEEDED, 2, 1)
    check_invariants([job.pk])
