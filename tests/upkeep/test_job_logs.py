"""Each attempt's logs: stored within the job's cap, deleted with their job by pruning,
retention, an operator's bulk delete and the ORM."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from testapp import jobs

from django_leasejobs import upkeep
from django_leasejobs.models import Job, JobLog, Status
from django_leasejobs.upkeep import AttemptLogs, store_logs

from .test_retention import pruner, succeeded

pytestmark = pytest.mark.django_db

LINE = {"level": "INFO", "logger": "x", "message": "m", "at": "2026-01-01T00:00:00Z"}


def logged(job_id: int, attempt: int = 1, count: int = 1, size: int = 100) -> None:
    store_logs([AttemptLogs(job_id, attempt, [LINE] * count, size)])


def test_one_insert_for_many_attempts(django_assert_max_num_queries) -> None:
    rows = [jobs.noop.enqueue() for _ in range(5)]
    with django_assert_max_num_queries(3):  # the insert, in its transaction
        store_logs([AttemptLogs(row.pk, 1, [LINE], 10) for row in rows])
    assert JobLog.objects.count() == 5


def test_the_job_cap_deletes_the_oldest_attempts_after_the_first() -> None:
    job = jobs.noop.enqueue()
    for attempt in (1, 2, 3):
        logged(job.pk, attempt, count=attempt, size=400)
    store_logs([AttemptLogs(job.pk, 4, [LINE], 400)], cap=1000)
    assert list(JobLog.objects.values_list("attempt", flat=True)) == [1, 4]
    assert job.logs()[1] == {"attempt": 4, "dropped": 5}  # attempts 2 and 3: 2 + 3 records


def test_a_dropped_marker_counts_what_it_stood_for_when_dropped_again() -> None:
    job = jobs.noop.enqueue()
    logged(job.pk, 1, size=400)
    store_logs([AttemptLogs(job.pk, 2, [{"dropped": 7}, LINE], 400)])
    store_logs([AttemptLogs(job.pk, 3, [LINE], 400)], cap=900)
    assert job.logs()[1] == {"attempt": 3, "dropped": 8}


class TestDeletion:
    @pytest.fixture(autouse=True)
    def _week(self, settings: Any) -> None:
        settings.LEASEJOBS_RETENTION = {"succeeded": "7d"}

    def test_retention_deletes_the_logs_of_the_jobs_it_deletes_only(self) -> None:
        old, recent = succeeded(2, days_ago=8), succeeded(1, days_ago=1)
        for pk in [*old, *recent]:
            logged(pk)
        assert pruner("a").tick() == 2
        assert list(JobLog.objects.values_list("job_id", flat=True)) == recent

    def test_a_job_that_left_its_state_keeps_its_logs(self) -> None:
        (pk,) = succeeded(1, days_ago=8)
        logged(pk)
        Job.objects.filter(pk=pk).update(status=Status.PENDING, in_history=False)
        upkeep.prune_finished(Status.SUCCEEDED, older_than=dt.timedelta(days=7))
        assert JobLog.objects.filter(job_id=pk).exists()

    def test_a_bulk_delete_and_the_orm_delete_them(self) -> None:
        first, second = succeeded(2, days_ago=1)
        logged(first)
        logged(second)
        assert upkeep.delete_finished([first]) == (1, [])
        Job.objects.get(pk=second).delete()
        assert not JobLog.objects.exists()
