"""Handlers that choose their retries, on real ``runjobworker --burst`` processes.

A first burst runs each job once: the retried one waits its hour, the snoozed one too (its
attempt not charged), the one raising outside ``retry_on`` is dead at once. Time is moved by
moving ``run_at`` in the database; a second burst finishes them.
"""

from __future__ import annotations

import pytest
from testapp import retry_jobs
from testapp.models import Hit

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import DeadLetter, Job, Status

from ..conftest import shifted
from ..invariants import check_invariants
from .conftest import FAST

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_retry_snooze_and_retry_on_across_two_bursts(spawn) -> None:
    retried = retry_jobs.retry_once.enqueue(3600)
    snoozed = retry_jobs.snooze_once.enqueue(3600)
    async_snoozed = retry_jobs.async_snooze_once.enqueue(3600)
    refused = retry_jobs.only_network.enqueue("value")
    ids = [retried.pk, snoozed.pk, async_snoozed.pk, refused.pk]

    first = spawn("--burst", "--concurrency", "2", *FAST, name="first")
    assert first.wait() == 0, first.log()
    log = first.log()
    assert log.count("job.snoozed") == 2, log
    assert log.count("job.failed") == 1, log  # the Retry: one line, as any retry
    rows = {job.pk: job for job in Job.objects.filter(pk__in=ids).order_by("pk")}
    assert rows[retried.pk].status == Status.FAILED
    assert rows[retried.pk].errors[0]["kind"] == "retry requested"
    for pk in (snoozed.pk, async_snoozed.pk):
        job = rows[pk]
        assert (job.status, job.attempt, job.released, job.snoozes) == (Status.PENDING, 1, 1, 1)
    for job in (rows[retried.pk], rows[snoozed.pk], rows[async_snoozed.pk]):
        assert (job.run_at - db_now()).total_seconds() > 3500  # waits its hour, in the DB
    assert DeadLetter.objects.get(job_id=refused.pk).reason == "not in retry_on"

    Job.objects.filter(pk__in=ids, status__in=[Status.PENDING, Status.FAILED]).update(
        run_at=shifted(-1)
    )
    second = spawn("--burst", "--concurrency", "2", *FAST, name="second")
    assert second.wait() == 0, second.log()
    done = Job.objects.filter(pk__in=[retried.pk, snoozed.pk, async_snoozed.pk])
    assert set(done.values_list("status", "attempt", "result")) == {
        (Status.SUCCEEDED, 2, "done on attempt 2")
    }
    assert Hit.objects.filter(job_id__in=ids).count() == 7
    check_invariants(ids)
