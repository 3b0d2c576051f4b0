"""Crashed and paused workers: their jobs are finished by another worker, exactly once."""

from __future__ import annotations

import signal

import pytest
from testapp import jobs
from testapp.models import Hit

from django_leasejobs.models import Job, Status

from ..conftest import shifted
from ..invariants import check_invariants, wait_for
from .conftest import FAST, pause

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]


def running_under(job_ids: list[int], worker_id: str) -> bool:
    return Job.objects.filter(
        pk__in=job_ids, status=Status.RUNNING, lease_owner=worker_id
    ).count() == len(job_ids)


def snapshot(job_ids: list[int]) -> list[dict]:
    fields = ("pk", "status", "attempt", "result", "errors", "finished_at", "lease_owner", "run_at")
    return list(Job.objects.filter(pk__in=job_ids).order_by("pk").values(*fields))


def take_over(job_ids: list[int], worker_id: str) -> None:
    """Expire the leases (instead of waiting), let the worker recover them, make them due."""
    Job.objects.filter(pk__in=job_ids).update(lease_expires_at=shifted(-1))
    wait_for(
        lambda: Job.objects.filter(pk__in=job_ids, status=Status.FAILED).count() == len(job_ids),
        what="lease recovery",
    )
    Job.objects.filter(pk__in=job_ids).update(run_at=shifted(-1))
    wait_for(lambda: running_under(job_ids, worker_id), what="second worker claims")


def test_kill_9_mid_job_another_worker_completes_it_as_attempt_2(spawn) -> None:
    job = jobs.sleep.enqueue(3, label="survivor")
    first = spawn("--concurrency", "1", *FAST, name="first")
    wait_for(lambda: running_under([job.pk], first.worker_id), what="first worker claims")
    first.send(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL

    second = spawn("--concurrency", "1", *FAST, name="second")
    take_over([job.pk], second.worker_id)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.SUCCEEDED, what="success")

    row = Job.objects.get(pk=job.pk)
    assert row.attempt == 2
    assert [entry["kind"] for entry in row.errors] == ["lease expired"]
    assert first.worker_id in row.errors[0]["error"]
    assert list(Hit.objects.filter(job_id=job.pk).values_list("attempt", flat=True)) == [2]
    check_invariants([job.pk])
    second.send(signal.SIGTERM)
    assert second.wait() == 0


def test_a_paused_worker_past_its_lease_changes_nothing_when_it_resumes(spawn) -> None:
    done = jobs.sleep.enqueue(2, label="sleep")
    failing = jobs.slow_fail_first.enqueue(2, label="fail")
    ids = [done.pk, failing.pk]
    zombie = spawn("--concurrency", "2", *FAST, name="zombie")
    wait_for(lambda: running_under(ids, zombie.worker_id), what="zombie claims both")
    pause(zombie)

    second = spawn("--concurrency", "2", *FAST, name="second")
    take_over(ids, second.worker_id)
    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED).count() == 2,
        what="second worker finishes both",
    )
    second.send(signal.SIGTERM)
    assert second.wait() == 0
    final = snapshot(ids)

    zombie.send(signal.SIGCONT)
    # The zombie wakes: its handlers return (one succeeds, one raises), its heartbeat runs.
    wait_for(
        lambda: Hit.objects.filter(job_id__in=ids, attempt=1).count() == 2,
        what="zombie handlers return",
    )
    wait_for(lambda: "job.stale" in zombie.log() or "lease_lost" in zombie.log(), what="stale")
    zombie.send(signal.SIGTERM)
    assert zombie.wait() == 0
    assert "succeeded=0 retried=0 dead=0 stale=2" in zombie.log()

    assert snapshot(ids) == final
    rows = {row["pk"]: row for row in final}
    assert rows[done.pk]["attempt"] == rows[failing.pk]["attempt"] == 2
    assert rows[failing.pk]["result"] == "ok on attempt 2"
    assert [e["kind"] for e in rows[failing.pk]["errors"]] == ["lease expired"]
    check_invariants(ids)


def test_kill_9_during_a_prefetched_batch_every_job_ends_once_and_none_starts_early(
    spawn,
) -> None:
    due = jobs.sleep.enqueue_many([((0.01,), {"label": f"due{i}"}) for i in range(300)])
    later = jobs.sleep.enqueue_many(
        [{"args": [0.01], "kwargs": {"label": f"later{i}"}, "delay": 3} for i in range(20)]
    )
    ids = [j.pk for j in due + later]
    first = spawn("--concurrency", "8", *FAST, name="first")
    # More jobs held than threads: claimed jobs waiting for a thread (the prefetch).
    held = Job.objects.filter(status=Status.RUNNING, lease_owner=first.worker_id)
    wait_for(lambda: held.count() > 8, what="a prefetched batch")
    first.send(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    orphans = list(held.values_list("pk", flat=True))

    second = spawn("--concurrency", "8", *FAST, name="second")
    # A completion the killed worker had sent may still commit: expire only what still runs.
    Job.objects.filter(pk__in=orphans, status=Status.RUNNING).update(lease_expires_at=shifted(-1))
    finished = Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED)
    wait_for(lambda: finished.count() == len(ids), what="every job succeeded")

    rows = check_invariants(ids)  # one final state each, no token ran twice, none early
    retried = [row for row in rows if row.attempt > 1]
    assert retried, "no orphan was recovered"
    assert {row.pk for row in retried} <= set(orphans)
    for row in retried:
        assert row.attempt == 2
        assert [entry["kind"] for entry in row.errors] == ["lease expired"]
    second.send(signal.SIGTERM)
    assert second.wait() == 0
