"""``runjobworker --burst`` with async handlers: a real process drains sync and async jobs."""

from __future__ import annotations

import pytest
from testapp import jobs
from testapp.models import Hit

from django_leasejobs.models import Job, Status

from ..invariants import check_invariants
from .conftest import FAST

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_burst_drains_async_and_sync_jobs_each_exactly_once(spawn) -> None:
    naps = jobs.nap.enqueue_many([((0.2,), {})] * 60)
    recorded = jobs.async_record.enqueue_many([((f"a{i}",), {}) for i in range(20)])
    synced = jobs.record.enqueue_many([((f"s{i}",), {}) for i in range(10)])
    flaky = jobs.async_flaky.enqueue(succeed_on=2)
    where = jobs.async_thread_name.enqueue()
    jobs.wait_until_final.enqueue([flaky.pk], priority=-1)  # the retry runs in this burst
    worker = spawn("--burst", "--concurrency", "2", "--async-concurrency", "25", *FAST)
    assert worker.wait(timeout=120) == 0, worker.log()

    log = worker.log()
    assert "async_concurrency=25" in log
    ids = [j.pk for j in (*naps, *recorded, *synced, flaky, where)]
    rows = check_invariants(ids, expected_count=len(ids))
    assert {row.status for row in rows} == {Status.SUCCEEDED}
    assert Job.objects.get(pk=flaky.pk).attempt == 2
    assert Job.objects.get(pk=where.pk).result == "leasejobs-async"
    hits = Hit.objects.filter(job_id__in=[j.pk for j in (*recorded, *synced)])
    assert hits.count() == 30
    assert "worker.async_error" not in log
    assert "Traceback" not in log
