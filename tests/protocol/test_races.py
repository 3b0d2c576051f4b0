"""Two connections racing on the same rows: guarded statements let exactly one win."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome

from ..conftest import race, shifted

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_claimers_never_both_win_a_row() -> None:
    jobs.noop.enqueue_many([((), {})] * 300)

    def drain(worker: str) -> Callable[[], list[tuple[int, int]]]:
        def loop() -> list[tuple[int, int]]:
            taken = []
            while batch := protocol.claim(worker, batch=7):
                taken.extend((job.pk, job.attempt) for job in batch)
            return taken

        return loop

    results = race(*(drain(f"w{i}") for i in range(4)))
    claimed = [token for taken in results for token in taken]
    assert len(claimed) == 300
    assert len({job_id for job_id, _ in claimed}) == 300
    assert {attempt for _, attempt in claimed} == {1}
    owners = Counter(Job.objects.values_list("lease_owner", flat=True))
    assert sum(owners.values()) == 300


def _lock_wait_guard() -> str:
    """SQL that makes waiting on a row lock fail after 5 s instead of hanging the test."""
    if connection.vendor == "postgresql":
        return "SET lock_timeout = '5s'"
    return "SET SESSION innodb_lock_wait_timeout = 5"


def test_claim_skips_locked_rows_instead_of_waiting() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: one write lock serialises every claimer")
    locked, free = jobs.noop.enqueue(), jobs.noop.enqueue()
    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(
                "SELECT id FROM django_leasejobs_job WHERE id = %s FOR UPDATE", [locked.pk]
            )

            def claim_with_lock_timeout() -> list[int]:
                with connection.cursor() as own:
                    # Waiting on the held lock would raise instead of hanging the test.
                    own.execute(_lock_wait_guard())
                return [job.pk for job in protocol.claim("w2", batch=10)]

            (claimed,) = race(claim_with_lock_timeout)
            assert claimed == [free.pk]
            cursor.execute("ROLLBACK")
    finally:
        holder.close()
    assert [job.pk for job in protocol.claim("w3", batch=10)] == [locked.pk]


@pytest.mark.parametrize(
    ("spread", "queues"),
    [
        (["default"], ["default"]),
        (["a", "b", "c"], ["a", "b", "c"]),
        (["a", "b", "c"], None),
        (["a"], ["a", "b"]),
        (["default"], None),
    ],
    ids=["one queue", "given queues", "every queue", "given, one busy", "every, one busy"],
)
def test_a_claim_in_progress_locks_only_the_rows_it_takes(
    spread: list[str], queues: list[str] | None
) -> None:
    """A second claimer gets the next due rows while the first claim's transaction is open.

    On MariaDB a locking SELECT with ORDER BY ... LIMIT locks every row it sorts, not only the
    rows it returns: the first claimer would hold every due row and the second would get none.
    Over several queues both claimers read the same best rows first; the second must still get
    a full batch, of the rows after the first's, also when one queue holds all the work (an empty
    claim there sends a worker to sleep while jobs are due, and a second process adds nothing).
    """
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: one write lock serialises every claimer")
    created = jobs.noop.enqueue_many(
        [{"args": [], "queue": spread[n % len(spread)]} for n in range(6)]
    )
    first_holds = threading.Event()
    second_done = threading.Event()
    first: list[int] = []

    def claim_and_hold() -> None:
        with transaction.atomic():
            first.extend(job.pk for job in protocol.claim("first", queues=queues, batch=2))
            first_holds.set()
            second_done.wait(timeout=30)

    def claim_while_held() -> list[int]:
        first_holds.wait(timeout=30)
        try:
            with connection.cursor() as own:
                own.execute(_lock_wait_guard())
            return [job.pk for job in protocol.claim("second", queues=queues, batch=2)]
        finally:
            second_done.set()

    _, second = race(claim_and_hold, claim_while_held)
    assert sorted(first) == [created[0].pk, created[1].pk]
    assert sorted(second) == [created[2].pk, created[3].pk]


def test_complete_racing_lease_recovery_has_one_winner() -> None:
    verdicts = Counter()
    for _ in range(30):
        jobs.noop.enqueue()
        (job,) = protocol.claim("w1", batch=1)
        Job.objects.filter(pk=job.pk).update(lease_expires_at=shifted(-1))
        completed, recovered = race(
            lambda job=job: protocol.complete(job.pk, job.attempt),
            lambda: protocol.recover_expired(),
        )
        status = Job.objects.get(pk=job.pk).status
        if completed is Outcome.SUCCEEDED:
            assert recovered.get(job.pk, Outcome.STALE) is Outcome.STALE
            assert status == Status.SUCCEEDED
        else:
            assert completed is Outcome.STALE
            assert recovered[job.pk] is Outcome.RETRIED
            assert status == Status.FAILED
        verdicts[status] += 1
        protocol.cancel(job.pk)
    assert sum(verdicts.values()) == 30


def test_cancel_racing_claim_has_one_winner() -> None:
    for _ in range(30):
        job = jobs.noop.enqueue()
        asked, claimed = race(
            lambda job=job: protocol.request_cancel(job.pk),
            lambda: protocol.claim("w1", batch=1),
        )
        status = Job.objects.get(pk=job.pk).status
        if asked is protocol.Cancel.CANCELLED:
            assert claimed == []
            assert status == Status.CANCELLED
        else:  # claimed first: only asked, and the worker's token ends it
            assert asked is protocol.Cancel.REQUESTED
            assert [j.pk for j in claimed] == [job.pk]
            assert status == Status.RUNNING
            assert protocol.cancel_attempt(job.pk, 1) is Outcome.CANCELLED
            assert protocol.complete(job.pk, 1) is Outcome.STALE


def test_fail_racing_heartbeat_of_a_stale_worker() -> None:
    """A stale worker's heartbeat never resurrects a job another attempt finished."""
    jobs.noop.enqueue()
    (old,) = protocol.claim("old", batch=1)
    Job.objects.filter(pk=old.pk).update(lease_expires_at=shifted(-1))
    protocol.recover_expired()
    Job.objects.filter(pk=old.pk).update(run_at=shifted(-1))
    (new,) = protocol.claim("new", batch=1)
    lost, outcome = race(
        lambda: protocol.heartbeat("old", [(old.pk, old.attempt)]),
        lambda: protocol.fail(new.pk, new.attempt, Failure("x")),
    )
    assert lost == {old.pk}
    assert outcome is Outcome.RETRIED
    row = Job.objects.get(pk=old.pk)
    assert (row.status, row.attempt, row.lease_owner) == (Status.FAILED, 2, "")


def test_replaying_one_dead_letter_concurrently_creates_one_job() -> None:
    job = jobs.always_fails.enqueue(max_attempts=1)
    (claimed,) = protocol.claim("w1", batch=1)
    assert protocol.fail(claimed.pk, claimed.attempt, Failure("x")) is Outcome.DEAD
    letter_id = DeadLetter.objects.get(job_id=job.pk).pk
    replayed = race(*(lambda: protocol.replay(letter_id).pk for _ in range(4)))
    assert len(set(replayed)) == 1
    assert Job.objects.count() == 2


def test_enqueue_in_a_transaction_is_invisible_to_claimers_until_commit() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: a claimer waits for the open transaction to end")
    seen_before_commit: list[list[Job]] = []
    with transaction.atomic():
        jobs.noop.enqueue()
        seen_before_commit.extend(race(lambda: protocol.claim("w1", batch=10)))
    assert seen_before_commit == [[]]
    assert len(protocol.claim("w1", batch=10)) == 1
