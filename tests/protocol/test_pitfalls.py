"""Failure modes other job queues shipped, each proven absent in the core.

One test per pitfall that the lease protocol itself (``protocol``) can prove; the worker, cron
and admin pitfalls are tested with those components. Each test's name says the bug it rules
out, and its docstring names the queue that had it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import DatabaseError, close_old_connections
from django.db.models.functions import Now
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.errors import InvalidTransitionError
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome, failures

from ..conftest import race

pytestmark = pytest.mark.django_db(transaction=True)


def row(job_id: int) -> dict[str, Any]:
    """Every column of a job, to show that a refused write changed nothing."""
    return Job.objects.filter(pk=job_id).values().get()


def claim_one(worker: str = "w1") -> Job:
    (job,) = protocol.claim(worker, batch=1)
    return job


def db_is_due(job_id: int) -> bool:
    """Whether the database clock says the job's run_at has come."""
    return Job.objects.filter(pk=job_id, run_at__lte=Now()).exists()


# --------------------------------------------------------------------------- races on state


def test_rescue_never_overwrites_a_job_that_completed_after_the_rescuer_read_it(
    expire_lease: Callable[..., None],
) -> None:
    """River #1302: the rescuer read an expired job, the job completed, the rescuer wrote.

    Lease recovery reads (id, attempt) of expired rows, then writes each one guarded by (id,
    attempt, running, still expired). Here the completion lands between the read and the
    write: the rescuer's write is the second step of ``recover_expired`` run with what it read.
    """
    jobs.noop.enqueue()
    job = claim_one()
    expire_lease(job)
    read_by_rescuer = list(
        Job.objects.filter(status=Status.RUNNING).values_list("pk", "attempt", "lease_owner")
    )
    assert read_by_rescuer == [(job.pk, job.attempt, "w1")]
    assert protocol.complete(job.pk, job.attempt, result=7) is Outcome.SUCCEEDED
    before = row(job.pk)
    (job_id, attempt, _owner) = read_by_rescuer[0]
    outcome = failures._fail(
        job_id,
        attempt,
        Failure("Lease expired.", kind="lease expired"),
        retryable=True,
        backoff=None,
        expired_only=True,
    )
    assert outcome is Outcome.STALE
    assert row(job.pk) == before
    assert before["status"] == Status.SUCCEEDED
    assert before["result"] == 7
    assert protocol.recover_expired() == {}
    assert not DeadLetter.objects.exists()


def test_a_job_cancelled_after_a_rescue_never_runs_again(
    expire_lease: Callable[..., None], make_due: Callable[..., None]
) -> None:
    """A fault test of River: a job cancelled during a rescue ran again.

    Cancel, rescue and complete race on two connections, many times; whichever order the
    database picks, a cancelled job is never claimed again and its old worker cannot write it.
    """
    for _ in range(15):
        job = jobs.noop.enqueue()
        old = claim_one()
        expire_lease(old)
        # The rescue and an operator's cancel race. Cancel finds the row running (the request
        # is recorded and the rescue ends the attempt cancelled) or failed (cancelled at once).
        recovered, asked = race(
            lambda: protocol.recover_expired(),
            lambda job=job: protocol.request_cancel(job.pk),
        )
        if asked is protocol.Cancel.REQUESTED:
            assert recovered == {job.pk: Outcome.CANCELLED}
        else:
            assert asked is protocol.Cancel.CANCELLED
            assert recovered == {job.pk: Outcome.RETRIED}
        make_due(job)
        cancelled_row = row(job.pk)
        assert cancelled_row["status"] == Status.CANCELLED
        assert protocol.claim("w2", batch=10) == []
        assert protocol.complete(old.pk, old.attempt) is Outcome.STALE
        assert protocol.heartbeat("w1", [(old.pk, old.attempt)]) == {old.pk}
        assert protocol.fail(old.pk, old.attempt, Failure("late")) is Outcome.STALE
        assert row(job.pk) == cancelled_row


def test_a_running_job_is_only_asked_to_cancel_so_a_rescue_cannot_resurrect_a_cancel() -> None:
    """Cancel of a leased job only records the request: it is never cancelled behind its
    worker's back, so a completion by its token still wins and nothing overwrites a cancel."""
    jobs.noop.enqueue()
    job = claim_one()
    before = row(job.pk)
    assert protocol.request_cancel(job.pk) is protocol.Cancel.REQUESTED
    after = row(job.pk)
    assert after.pop("cancel_requested_at") is not None
    before.pop("cancel_requested_at")
    assert after == before
    assert protocol.complete(job.pk, job.attempt) is Outcome.SUCCEEDED
    assert protocol.cancel(job.pk) is False
    assert protocol.cancel_attempt(job.pk, job.attempt) is Outcome.STALE
    assert row(job.pk)["status"] == Status.SUCCEEDED


def test_replay_while_a_stale_worker_of_an_older_attempt_wakes_up(
    expire_lease: Callable[..., None],
) -> None:
    """Replaying a dead job while a stale worker of an older attempt wakes up.

    The replay is a new job (new id); the dead job keeps its attempt token. The old worker's
    token (old id, attempt 1) names neither the revived job nor the new one, even though the
    new job's first claim is also attempt 1.
    """
    original = jobs.noop.enqueue(max_attempts=1)
    stale = claim_one("paused-worker")
    expire_lease(stale)
    assert protocol.recover_expired() == {original.pk: Outcome.DEAD}
    letter = DeadLetter.objects.get(job_id=original.pk)
    new = protocol.replay(letter.pk)
    assert new.pk != original.pk
    fresh = claim_one("new-worker")
    assert (fresh.pk, fresh.attempt) == (new.pk, stale.attempt)
    dead_before, new_before = row(original.pk), row(new.pk)
    assert protocol.heartbeat("paused-worker", [(stale.pk, stale.attempt)]) == {stale.pk}
    assert protocol.complete(stale.pk, stale.attempt) is Outcome.STALE
    assert protocol.fail(stale.pk, stale.attempt, Failure("late")) is Outcome.STALE
    assert protocol.release(stale.pk, stale.attempt) is Outcome.STALE
    assert (row(original.pk), row(new.pk)) == (dead_before, new_before)
    assert protocol.complete(fresh.pk, fresh.attempt) is Outcome.SUCCEEDED
    assert DeadLetter.objects.count() == 1


def test_a_retry_never_trips_the_dedupe_index(
    expire_lease: Callable[..., None], make_due: Callable[..., None]
) -> None:
    """Procrastinate #1446: a retry hit the dedupe unique index and left the row in "doing".

    The live dedupe key stays with the job through failure, reclaim and release (it is the same
    live job), so no transition re-inserts it; only a final state frees it.
    """
    job = jobs.noop.enqueue(dedupe_key="nightly")
    steps = [
        lambda j: protocol.fail(j.pk, j.attempt, Failure("x")),
        lambda j: (expire_lease(j), protocol.recover_expired()[j.pk])[1],
        lambda j: protocol.release(j.pk, j.attempt),
    ]
    expected = [Outcome.RETRIED, Outcome.RETRIED, Outcome.RELEASED]
    for step, outcome in zip(steps, expected, strict=True):
        make_due(job)
        claimed = claim_one()
        assert claimed.pk == job.pk
        assert step(claimed) is outcome
        state = row(job.pk)
        assert state["status"] in (Status.FAILED, Status.PENDING)
        assert state["live_dedupe_key"] == "nightly"
        assert jobs.noop.enqueue(dedupe_key="nightly").pk == job.pk
    make_due(job)
    claimed = claim_one()
    assert protocol.complete(claimed.pk, claimed.attempt) is Outcome.SUCCEEDED
    assert row(job.pk)["live_dedupe_key"] is None
    assert jobs.noop.enqueue(dedupe_key="nightly").pk != job.pk
    assert Job.objects.filter(status=Status.RUNNING).count() == 0


def test_replaying_a_dead_job_whose_dedupe_key_is_live_again_is_refused_cleanly() -> None:
    """The dedupe key applies to live jobs only: a replay meeting a live holder is an error
    that names the holder, not an IntegrityError or a second live job with one key."""
    dead = jobs.noop.enqueue(dedupe_key="k", max_attempts=1)
    claimed = claim_one()
    assert protocol.fail(claimed.pk, claimed.attempt, Failure("x")) is Outcome.DEAD
    holder = jobs.noop.enqueue(dedupe_key="k")
    letter = DeadLetter.objects.get(job_id=dead.pk)
    with pytest.raises(InvalidTransitionError, match=f"Job {holder.pk} already holds"):
        protocol.replay(letter.pk)
    assert Job.objects.filter(live_dedupe_key="k").count() == 1
    letter.refresh_from_db()
    assert letter.replayed_job_id is None


# --------------------------------------------------------------------------- stuck or lost jobs


def test_a_reclaim_is_an_attempt_not_a_failure_verdict(expire_lease: Callable[..., None]) -> None:
    """Solid Queue #422: jobs of a dead process were marked failed for good, not retried.

    A reclaim retries the job (``failed`` with a run_at, claimable again) and charges the
    attempt; it dead-letters only when the budget is spent.
    """
    job = jobs.noop.enqueue(max_attempts=2)
    first = claim_one()
    expire_lease(first)
    assert protocol.recover_expired() == {job.pk: Outcome.RETRIED}
    state = row(job.pk)
    assert (state["status"], state["attempt"], state["lease_owner"]) == (Status.FAILED, 1, "")
    assert [e["kind"] for e in state["errors"]] == ["lease expired"]
    assert not DeadLetter.objects.exists()
    Job.objects.filter(pk=job.pk).update(run_at=state["created_at"])
    second = claim_one("w2")
    assert second.attempt == 2
    expire_lease(second)
    assert protocol.recover_expired() == {job.pk: Outcome.DEAD}
    assert DeadLetter.objects.get(job_id=job.pk).reason == "attempts exhausted"


def test_a_reclaimed_job_goes_behind_other_due_jobs_by_its_backoff(
    expire_lease: Callable[..., None],
) -> None:
    """graphile-worker PR #313: jobs unlocked after a long lease went straight back to the head
    of the queue and blocked it again. A reclaim sets run_at = now + backoff."""
    poison = jobs.noop.enqueue(priority=10)
    taken = claim_one()
    assert taken.pk == poison.pk
    other = jobs.noop.enqueue(priority=0)
    expire_lease(taken)
    assert protocol.recover_expired() == {poison.pk: Outcome.RETRIED}
    assert not db_is_due(poison.pk)
    assert [j.pk for j in protocol.claim("w2", batch=10)] == [other.pk]


def test_a_restarted_worker_reusing_its_id_cannot_write_its_old_attempt(
    expire_lease: Callable[..., None], make_due: Callable[..., None]
) -> None:
    """Procrastinate #1518, Oban #862: ownership followed the worker name, so a restarted
    process with the same id looked alive. Here the attempt token owns the job: the same worker
    name with the old attempt is stale, and the expired lease is reclaimed all the same."""
    jobs.noop.enqueue()
    old = claim_one("host-1")
    expire_lease(old)
    assert protocol.recover_expired() == {old.pk: Outcome.RETRIED}
    make_due(old)
    new = claim_one("host-1")
    assert new.attempt == old.attempt + 1
    before = row(new.pk)
    # The old process (same name) wakes up and writes with its old token: refused, and its
    # heartbeat reports the lease lost; the new attempt's heartbeat keeps its own.
    assert protocol.heartbeat("host-1", [(old.pk, old.attempt)]) == {old.pk}
    assert protocol.complete(old.pk, old.attempt) is Outcome.STALE
    assert row(new.pk) == before
    assert protocol.heartbeat("host-1", [(new.pk, new.attempt)]) == set()
    assert protocol.complete(new.pk, new.attempt) is Outcome.SUCCEEDED


def test_a_completion_lost_to_a_terminated_connection_expires_and_the_job_runs_again(
    kill_own_connection: Callable[[], None],
    expire_lease: Callable[..., None],
    make_due: Callable[..., None],
) -> None:
    """Solid Queue #748: the "finished" write failed on a transient error while the worker
    stayed alive, and the job stayed claimed for ever.

    The completion fails on a really terminated connection; the job is not stuck: its lease
    expires, it is retried (at-least-once), and the late completion of the old attempt, once the
    connection is back, is refused as stale.
    """
    job = jobs.noop.enqueue()
    old = claim_one()
    kill_own_connection()
    with pytest.raises(DatabaseError):
        protocol.complete(old.pk, old.attempt)
    close_old_connections()  # what the worker does around each unit of work
    assert row(job.pk)["status"] == Status.RUNNING  # the completion was never written
    expire_lease(old)
    assert protocol.recover_expired() == {job.pk: Outcome.RETRIED}
    make_due(job)
    again = claim_one("w2")
    assert (again.pk, again.attempt) == (job.pk, 2)
    assert protocol.complete(old.pk, old.attempt) is Outcome.STALE
    assert protocol.complete(again.pk, again.attempt) is Outcome.SUCCEEDED
    state = row(job.pk)
    assert (state["status"], state["attempt"]) == (Status.SUCCEEDED, 2)


def test_a_completion_retried_after_reconnecting_within_the_lease_succeeds(
    kill_own_connection: Callable[[], None],
) -> None:
    """The other half of Solid Queue #748: retrying the completion on a new connection while the
    lease is still valid finishes the job once, with no second run."""
    job = jobs.noop.enqueue()
    taken = claim_one()
    kill_own_connection()
    with pytest.raises(DatabaseError):
        protocol.complete(taken.pk, taken.attempt, result="done")
    close_old_connections()
    assert protocol.complete(taken.pk, taken.attempt, result="done") is Outcome.SUCCEEDED
    assert protocol.complete(taken.pk, taken.attempt, result="done") is Outcome.STALE
    state = row(job.pk)
    assert (state["status"], state["attempt"], state["result"]) == (Status.SUCCEEDED, 1, "done")
