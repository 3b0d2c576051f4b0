"""The claim sized to the work: a prefetch for short jobs, none for long ones, released on stop.

Jobs claimed by one statement share their ``started_at`` (the statement's time on every
database), so the number of distinct ``started_at`` values among a drained set of jobs is the
number of claims that took them.
"""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs.models import Job, Status
from django_leasejobs.runtime import async_execution
from django_leasejobs.runtime.claim_sizing import HORIZON, ClaimSizer
from django_leasejobs.runtime.worker import DEFAULT_BATCH, Worker

from ..invariants import check_invariants, wait_for
from .test_worker import FAST, Background


class TestClaimSizer:
    def test_before_any_job_has_run_it_claims_for_the_threads_alone(self) -> None:
        sizer = ClaimSizer(concurrency=4, batch=100)
        assert (sizer.prefetch, sizer.capacity, sizer.low_mark) == (0, 4, 1)
        assert sizer.wanted(held=0) == 4
        assert sizer.wanted(held=3) == 1
        assert sizer.wanted(held=4) == 0

    def test_short_jobs_prefetch_up_to_the_batch(self) -> None:
        sizer = ClaimSizer(concurrency=4, batch=100)
        sizer.observe(0.0001)
        assert sizer.prefetch == 100
        assert (sizer.capacity, sizer.low_mark) == (104, 50)
        assert sizer.wanted(held=60) == 0  # 44 free: below the low mark, no claim yet
        assert sizer.wanted(held=54) == 50
        assert sizer.wanted(held=0) == 100  # never more than a batch in one claim

    def test_the_prefetch_covers_the_horizon_at_the_pools_pace(self) -> None:
        sizer = ClaimSizer(concurrency=2, batch=100)
        sizer.observe(0.01)  # 2 threads x 100 jobs/s each
        assert sizer.prefetch == int(200 * HORIZON)

    def test_long_jobs_get_no_prefetch_and_a_free_thread_claims_at_once(self) -> None:
        sizer = ClaimSizer(concurrency=4, batch=100)
        sizer.observe(2.0)
        assert (sizer.prefetch, sizer.capacity, sizer.low_mark) == (0, 4, 1)
        assert sizer.wanted(held=3) == 1

    def test_the_mean_follows_a_change_of_pace(self) -> None:
        sizer = ClaimSizer(concurrency=4, batch=100)
        sizer.observe(0.0001)
        for _ in range(40):
            sizer.observe(5.0)
        assert sizer.prefetch == 0


@pytest.mark.django_db(transaction=True)
class TestWorkerClaims:
    def test_short_jobs_are_claimed_many_at_a_time_whatever_the_thread_count(self) -> None:
        drained = jobs.noop.enqueue_many([((), {})] * 300)
        summary = Worker(concurrency=2, **FAST, scheduler=False).run(burst=True)
        assert summary.succeeded == 300
        ids = [j.pk for j in drained]
        claims = Job.objects.filter(pk__in=ids).values("started_at").distinct().count()
        # Two threads claiming for their free slots would take at least 150 claims.
        assert claims <= 10
        check_invariants(ids)

    def test_long_jobs_are_claimed_one_free_thread_at_a_time(self, monkeypatch) -> None:
        # A project of sync handlers (with async ones, one job more is claimed to find them).
        monkeypatch.setattr(async_execution, "possible", lambda: False)
        slow = [jobs.sleep.enqueue(0.2, label=f"s{i}") for i in range(4)]
        summary = Worker(concurrency=1, **FAST, scheduler=False).run(burst=True)
        assert summary.succeeded == 4
        ids = [j.pk for j in slow]
        assert Job.objects.filter(pk__in=ids).values("started_at").distinct().count() == 4

    def test_default_batch(self) -> None:
        # The test project has async jobs: the batch covers the 100 async slots too.
        assert Worker(concurrency=4).options.batch == DEFAULT_BATCH + 4
        assert Worker(concurrency=500).options.batch == 600  # its threads and the 100 async slots
        assert Worker(concurrency=4, batch=7).options.batch == 7

    def test_a_stop_releases_prefetched_jobs_at_once_and_lets_the_running_one_finish(
        self,
    ) -> None:
        long = jobs.sleep.enqueue(60, label="long", priority=10)
        waiting = jobs.noop.enqueue_many([((), {})] * 5)
        worker = Worker(concurrency=1, grace=5.0, **FAST, scheduler=False)
        worker.loop.room.lanes[0].sizer.observe(
            0.001
        )  # as if short jobs had run: the first claim prefetches
        with Background(worker) as running:
            wait_for(lambda: Job.objects.filter(status=Status.RUNNING).count() == 6, what="6")
            worker.stop("test")
            wait_for(
                lambda: (
                    Job.objects.filter(
                        pk__in=[j.pk for j in waiting], status=Status.PENDING, released=1
                    ).count()
                    == 5
                ),
                what="prefetched jobs released",
            )
            # Released during the grace period, while the long job still runs.
            assert Job.objects.get(pk=long.pk).status == Status.RUNNING
        assert running.summary is not None
        assert (running.summary.released, running.summary.claimed) == (6, 6)
        assert not Job.objects.filter(status=Status.RUNNING).exists()
        assert not Job.objects.filter(pk__in=[j.pk for j in waiting], attempt__gt=1).exists()
