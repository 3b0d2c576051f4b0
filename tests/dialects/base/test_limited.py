"""The claim of jobs with concurrency or rate limits, on every dialect (``conftest.dialect``).

What the protocol's claim promises of it: each limit holds, the jobs without limits are taken
beside them in one claim order, a key another claimer holds is passed over, and the keys a
claim locks are those of the due jobs it may start (read from a second session while the
claim's transaction is open; on SQLite, the keys it takes while the database's write lock is
held).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from testapp import jobs

from django_leasejobs.dialects import Dialect
from django_leasejobs.dialects.base.within_limits import window_start
from django_leasejobs.models import Job, Limiter, Status

from ...conftest import race, shifted
from ..conftest import backend_pid, hold_key, locked_keys

pytestmark = pytest.mark.django_db


def claim_limited(
    dialect: Dialect, batch: int, queues: Sequence[str] | None = None, worker: str = "w1"
) -> list[Job]:
    return dialect.claim_limited(DEFAULT_DB_ALIAS, worker, queues, batch, 60.0)


def test_each_limit_holds_and_jobs_without_limits_come_beside_them(
    dialect: Dialect, all_due: Callable[[], None]
) -> None:
    jobs.per_tenant.enqueue_many([(("a",), {})] * 2 + [(("b",), {})])
    jobs.throttled.enqueue_many([((n,), {}) for n in range(7)])
    plain = jobs.noop.enqueue_many([((), {})] * 3)
    all_due()
    claimed = claim_limited(dialect, 20)
    assert Counter(j.concurrency_key or j.rate_key or "" for j in claimed) == {
        "tenant:a": 1, "tenant:b": 1, "testapp.jobs.throttled": 5, "": 3,
    }  # fmt: skip
    assert {j.pk for j in claimed} >= {j.pk for j in plain}
    for job in claimed:
        assert (job.status, job.attempt, job.lease_owner) == (Status.RUNNING, 1, "w1")
    later = claim_limited(dialect, 20, worker="w2")
    # The rate is 5 a minute: both claims in one minute start no more; a minute that ended
    # between them lets the next start the rest, and no minute more than 5.
    per_minute = Counter(window_start(j.started_at, 60) for j in [*claimed, *later] if j.rate_key)
    assert max(per_minute.values()) <= 5, per_minute
    if len(per_minute) == 1:
        assert later == []
        bucket = Limiter.objects.get(key="r:testapp.jobs.throttled")
        assert (bucket.started, bucket.blocked_until is not None) == (5, True)


def test_batch_and_queues_bound_the_claim_in_claim_order(
    dialect: Dialect, all_due: Callable[[], None]
) -> None:
    low = jobs.per_tenant.enqueue("a")
    high = jobs.per_tenant.enqueue("b", priority=5)
    plain = jobs.noop.enqueue(priority=3)
    other = jobs.per_tenant.enqueue("c", queue="other")
    all_due()
    assert [j.pk for j in claim_limited(dialect, 2, ["default"])] == [high.pk, plain.pk]
    assert [j.pk for j in claim_limited(dialect, 5, ["default"])] == [low.pk]
    assert [j.pk for j in claim_limited(dialect, 5)] == [other.pk]


def test_with_no_job_with_limits_due_it_is_the_plain_claim(
    dialect: Dialect, all_due: Callable[[], None]
) -> None:
    plain = jobs.noop.enqueue_many([((), {})] * 3)
    all_due()
    later = jobs.per_tenant.enqueue("a", delay=60)
    assert sorted(j.pk for j in claim_limited(dialect, 10)) == sorted(j.pk for j in plain)
    assert Job.objects.get(pk=later.pk).status == Status.PENDING
    assert not Limiter.objects.exists()


def claim_under_write_lock(
    dialect: Dialect, holder: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Job], set[str]]:
    """SQLite: a limited claim, and the keys it held when it took them (``_lock_limiters``).

    Each time it takes them, a second session must find the database's write lock taken: no
    other claimer can then change what the claim counts before it commits.
    """
    held: set[str] = set()
    take = dialect._lock_limiters

    def recorded(alias: str, keys: Iterable[str]) -> set[str]:
        taken = take(alias, keys)
        holder.ensure_connection()
        holder.connection.execute("PRAGMA busy_timeout = 0")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            holder.connection.execute("BEGIN IMMEDIATE")
        held.update(taken)
        return taken

    monkeypatch.setattr(dialect, "_lock_limiters", recorded)
    return claim_limited(dialect, 10), held


@pytest.mark.django_db(transaction=True)
def test_the_keys_a_claim_locks_are_those_of_the_due_jobs_it_may_start(
    dialect: Dialect, all_due: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Locked: the keys of due candidates. Not locked: a key whose jobs are not due, a key its
    running jobs fill, a spent rate bucket. The limiter rows exist beforehand, so a row lock
    seen is the claim's, not an insert's. SQLite has no row locks: there the keys the claim
    holds are those it counts under the database's write lock, held from before it counts."""
    jobs.per_tenant.enqueue_many([(("a",), {})] * 2 + [(("b",), {}), (("full",), {})] * 1)
    jobs.per_tenant.enqueue_many([(("full",), {})])
    jobs.throttled.enqueue(1)
    jobs.throttled_per_account.enqueue("spent")
    jobs.noop.enqueue()
    all_due()
    jobs.per_tenant.enqueue("later", delay=600)
    running = Job.objects.filter(concurrency_key="tenant:full").order_by("pk").first()
    Job.objects.filter(pk=running.pk).update(status=Status.RUNNING)
    keys = ["c:tenant:a", "c:tenant:b", "c:tenant:full", "c:tenant:later"]
    keys += ["r:testapp.jobs.throttled", "r:account:spent"]
    Limiter.objects.bulk_create([Limiter(key=key, name=key[2:]) for key in keys])
    Limiter.objects.filter(key="r:account:spent").update(
        window_start=shifted(-60), started=3, blocked_until=shifted(3000)
    )
    holder = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with transaction.atomic():
            if connection.vendor == "sqlite":
                claimed, locked = claim_under_write_lock(dialect, holder, monkeypatch)
            else:
                claimed = claim_limited(dialect, 10)
                locked = locked_keys(keys, holder, backend_pid())
    finally:
        holder.close()
    assert locked == {"c:tenant:a", "c:tenant:b", "r:testapp.jobs.throttled"}
    assert Counter(j.concurrency_key or j.rate_key or "" for j in claimed) == {
        "tenant:a": 1, "tenant:b": 1, "testapp.jobs.throttled": 1, "": 1,
    }  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_key_another_claimer_holds_is_passed_over_not_waited_for(
    dialect: Dialect, all_due: Callable[[], None]
) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its write lock serializes every claimer")
    held = jobs.per_tenant.enqueue("held")
    free = jobs.per_tenant.enqueue("free")
    all_due()
    Limiter.objects.bulk_create([Limiter(key=f"c:tenant:{t}", name=t) for t in ("held", "free")])
    holder = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            hold_key(holder, cursor, "c:tenant:held")
            assert [j.pk for j in claim_limited(dialect, 2)] == [free.pk]
            cursor.execute("ROLLBACK")
    finally:
        holder.close()
    assert [j.pk for j in claim_limited(dialect, 2, worker="w2")] == [held.pk]


@pytest.mark.django_db(transaction=True)
def test_pruning_passes_over_exactly_the_keys_an_open_claim_holds(
    dialect: Dialect, all_due: Callable[[], None]
) -> None:
    """The keys a limited claim locks, pinned from the other side: pruning takes the claimers'
    lock of each key it deletes (PostgreSQL: the key's advisory lock, computed from the key
    text in SQL by the claim and in Python by pruning; elsewhere the row lock), so while the
    claim's transaction is open it deletes every idle key's row but the two the claim holds."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its write lock serializes pruning with claims")
    jobs.per_tenant.enqueue_many([(("a",), {}), (("b",), {})])
    all_due()
    keys = ["c:tenant:a", "c:tenant:b", "c:tenant:idle"]
    Limiter.objects.bulk_create([Limiter(key=key, name=key[2:]) for key in keys])
    with transaction.atomic():
        claimed = claim_limited(dialect, 10)
        # In another session (a thread has its own connection), while the claim's locks hold.
        (pruned,) = race(
            lambda: dialect.prune_limiters(DEFAULT_DB_ALIAS, dt.timedelta(days=1), 10, "")
        )
    assert sorted(str(j.concurrency_key) for j in claimed) == ["tenant:a", "tenant:b"]
    assert pruned == (1, "c:tenant:idle")
    assert set(Limiter.objects.values_list("key", flat=True)) == {"c:tenant:a", "c:tenant:b"}
