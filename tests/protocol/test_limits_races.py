"""Claimers in threads, each on its own connection: limits hold over all of them at once."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connection
from django.db.models import Count
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.dialects.base.within_limits import window_start
from django_leasejobs.models import Job, Limiter, Status

from ..conftest import race

pytestmark = pytest.mark.django_db(transaction=True)

CUSTOMERS = 4
PER_CUSTOMER = 12
LIMIT = 2  # jobs.per_customer's concurrency_limit


def running_per_key() -> dict[str, int]:
    """One statement, so one consistent state of the table."""
    rows = (
        Job.objects.filter(status=Status.RUNNING, concurrency_key__isnull=False)
        .values_list("concurrency_key")
        .annotate(n=Count("id"))
    )
    return dict(rows)


def test_concurrent_claimers_never_run_more_than_the_limit_per_key(
    all_due: Callable[[], None],
) -> None:
    for customer in range(CUSTOMERS):
        jobs.per_customer.enqueue_many([((customer,), {})] * PER_CUSTOMER)
    jobs.noop.enqueue_many([((), {})] * 10)
    all_due()
    seen: list[dict[str, int]] = []
    lock = threading.Lock()

    def worker(name: str) -> Callable[[], int]:
        def loop() -> int:
            rng = random.Random(name)
            held: list[Job] = []
            done = 0
            for _ in range(400):
                held += protocol.claim(name, batch=3)
                counts = running_per_key()  # checked after every claim round
                with lock:
                    seen.append(counts)
                assert all(n <= LIMIT for n in counts.values()), counts
                rng.shuffle(held)
                cut = rng.randint(0, len(held))
                finishing, held = held[:cut], held[cut:]
                for job in finishing:
                    protocol.complete(job.pk, job.attempt)
                done += len(finishing)
                if not Job.objects.filter(status__in=["pending", "running"]).exists():
                    break
            for job in held:
                protocol.complete(job.pk, job.attempt)
            return done + len(held)

        return loop

    finished = race(*(worker(f"w{i}") for i in range(4)))
    assert sum(finished) == CUSTOMERS * PER_CUSTOMER + 10
    assert Job.objects.filter(status=Status.SUCCEEDED).count() == sum(finished)
    assert seen, "no claim round was checked"
    # The limit was reached, not only respected: keys ran LIMIT at once at some point.
    assert max(max(c.values(), default=0) for c in seen) == LIMIT


def test_concurrent_claimers_start_no_more_than_the_rate(all_due: Callable[[], None]) -> None:
    jobs.throttled.enqueue_many([((n,), {}) for n in range(20)])  # 5 a minute
    all_due()

    def claimer(name: str) -> Callable[[], list[int]]:
        def loop() -> list[int]:
            return [j.pk for _ in range(5) for j in protocol.claim(name, batch=2)]

        return loop

    taken = race(*(claimer(f"w{i}") for i in range(4)))
    started = [job_id for ids in taken for job_id in ids]
    assert len(started) == len(set(started))
    # The windows are the database's minutes: a race that runs across the turn of a minute
    # (a slow machine) may start up to five in each. Within one minute, exactly five.
    windows = Counter(
        window_start(at, 60)
        for at in Job.objects.filter(pk__in=started).values_list("started_at", flat=True)
    )
    assert all(count <= 5 for count in windows.values()), windows
    if len(windows) == 1:
        assert len(started) == 5
    statuses = Counter(Job.objects.values_list("status", flat=True))
    assert statuses == {"running": len(started), "pending": 20 - len(started)}


def test_a_key_another_claimer_holds_is_skipped_not_waited_for(
    all_due: Callable[[], None],
) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its write lock serializes every claimer")
    from django.db import connections, transaction

    jobs.per_tenant.enqueue("held")
    free = jobs.per_tenant.enqueue("free")
    all_due()
    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            if connection.vendor == "postgresql":  # advisory locks: no row is written
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["c:tenant:held"]
                )
            else:  # row locks: the rows must exist
                Limiter.objects.bulk_create(
                    [Limiter(key=f"c:tenant:{t}", name=f"tenant:{t}") for t in ("held", "free")]
                )
                key = holder.ops.quote_name("key")
                cursor.execute(
                    f"SELECT {key} FROM django_leasejobs_limiter WHERE {key} = %s FOR UPDATE",
                    ["c:tenant:held"],
                )
            with transaction.atomic():
                claimed = protocol.claim("w1", batch=2)
            assert [j.pk for j in claimed] == [free.pk]
            cursor.execute("ROLLBACK")
    finally:
        holder.close()
    assert [j.concurrency_key for j in protocol.claim("w2", batch=2)] == ["tenant:held"]


def test_claimers_at_once_spread_over_the_keys(all_due: Callable[[], None]) -> None:
    """The first claimer holds the keys of its own batch only, so a second claimer reading the
    same candidates at that moment takes the next keys instead of finding them all held."""
    if connection.vendor != "postgresql":
        pytest.skip("the ORM databases lock the keys of every candidate they read")
    for tenant in "abcd":
        jobs.per_tenant.enqueue(tenant)
    all_due()
    first_holds, second_done = threading.Event(), threading.Event()
    from django.db import transaction

    def first() -> list[str]:
        with transaction.atomic():
            claimed = protocol.claim("first", batch=2)
            first_holds.set()
            second_done.wait(30)
        return [str(j.concurrency_key) for j in claimed]

    def second() -> list[str]:
        first_holds.wait(30)
        try:
            return [str(j.concurrency_key) for j in protocol.claim("second", batch=2)]
        finally:
            second_done.set()

    by_first, by_second = race(first, second)
    assert by_first == ["tenant:a", "tenant:b"]
    assert by_second == ["tenant:c", "tenant:d"]
