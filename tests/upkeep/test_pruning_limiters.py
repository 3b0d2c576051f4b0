"""Limiter rows of long-past windows and idle keys are pruned in batches; limits still hold.

Windows are moved into the past by rewriting ``window_start`` (database time, no sleep).
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections
from testapp import jobs

from django_leasejobs import protocol, upkeep
from django_leasejobs.models import Job, Limiter, Status

from ..conftest import shifted

pytestmark = pytest.mark.django_db(transaction=True)

DAY = dt.timedelta(days=1)
HOUR = 3600


def keys() -> set[str]:
    return set(Limiter.objects.values_list("key", flat=True))


def rate_row(name: str, window_seconds_ago: float | None) -> None:
    window = None if window_seconds_ago is None else shifted(-window_seconds_ago)
    Limiter.objects.create(key="r:" + name, name=name, started=1)
    Limiter.objects.filter(key="r:" + name).update(window_start=window)


def prune_all(older_than: dt.timedelta = DAY, batch: int = 1000) -> list[int]:
    """Walk every batch; the rows each one deleted."""
    counts, after = [], ""
    while True:
        deleted, last = upkeep.prune_limiters(older_than, batch=batch, after_key=after)
        if last == after:
            return counts
        counts.append(deleted)
        after = last


def test_rows_of_long_past_windows_and_idle_keys_go_others_stay() -> None:
    rate_row("old", window_seconds_ago=2 * DAY.total_seconds())
    rate_row("never", window_seconds_ago=None)  # created by a claim that started none
    rate_row("current", window_seconds_ago=30)
    running = jobs.per_customer.enqueue(1)
    Job.objects.filter(pk=running.pk).update(status=Status.RUNNING)
    for customer in (1, 2):
        Limiter.objects.create(key=f"c:customer:{customer}", name=f"customer:{customer}")
    assert upkeep.count_prunable_limiters(DAY) == 3
    assert prune_all() == [3]
    assert keys() == {"r:current", "c:customer:1"}


def test_batches_are_bounded_and_walk_the_keys_in_order() -> None:
    for n in range(7):
        rate_row(f"k{n}", window_seconds_ago=3 * DAY.total_seconds())
    rate_row("k3b", window_seconds_ago=60)  # kept, in the middle of the walk
    assert prune_all(batch=3) == [3, 3, 1]
    assert keys() == {"r:k3b"}


def test_after_pruning_a_rate_key_starts_afresh_and_keeps_its_limit(
    all_due: Callable[[], None],
) -> None:
    jobs.throttled_per_account.enqueue_many([(("a",), {})] * 5)  # 3 an hour
    all_due()
    assert len(protocol.claim("w1", batch=10)) == 3
    assert prune_all() == []  # the window is current: the row stays, and so does the limit
    assert protocol.claim("w1", batch=10) == []
    Limiter.objects.filter(key="r:account:a").update(window_start=shifted(-2 * HOUR - 60))
    assert prune_all(dt.timedelta(hours=2)) == [1]
    assert keys() == set()
    assert len(protocol.claim("w1", batch=10)) == 2  # a new window, created again
    assert Limiter.objects.get(key="r:account:a").started == 2


def test_an_age_shorter_than_the_longest_rate_period_is_refused() -> None:
    rate_row("old", window_seconds_ago=2 * DAY.total_seconds())
    with pytest.raises(ValueError, match="longest rate period"):
        upkeep.prune_limiters(dt.timedelta(minutes=59))  # throttled_per_account: 3/h
    with pytest.raises(ValueError, match="positive integer"):
        upkeep.prune_limiters(DAY, batch=0)
    assert keys() == {"r:old"}


def test_a_row_a_claimer_holds_is_passed_over() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its write lock serializes pruning with claims")
    rate_row("held", window_seconds_ago=2 * DAY.total_seconds())
    rate_row("free", window_seconds_ago=2 * DAY.total_seconds())
    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            if connection.vendor == "postgresql":  # the claim's advisory lock on the key
                cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["r:held"])
            else:
                key = holder.ops.quote_name("key")
                cursor.execute(
                    f"SELECT {key} FROM django_leasejobs_limiter WHERE {key} = %s FOR UPDATE",
                    ["r:held"],
                )
            assert prune_all() == [1]
            assert keys() == {"r:held"}
            cursor.execute("ROLLBACK")
    finally:
        holder.close()
    assert prune_all() == [1]
    assert keys() == set()


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("prunejobs", *args, stdout=out)
    return out.getvalue()


def test_prunejobs_prunes_limiters_and_dry_runs() -> None:
    for n in range(3):
        rate_row(f"k{n}", window_seconds_ago=10 * DAY.total_seconds())
    rate_row("recent", window_seconds_ago=HOUR)
    assert "limiters: would delete 3 rows" in run("--limiters-older-than", "7d", "--dry-run")
    assert len(keys()) == 4
    out = run("--limiters-older-than", "7d", "--batch", "2")
    assert "limiters: deleted 3 rows of windows over 7d00h ago and idle keys in 2 batch(es)" in out
    assert keys() == {"r:recent"}


def test_prunejobs_refuses_a_limiter_age_under_the_longest_period() -> None:
    rate_row("old", window_seconds_ago=2 * DAY.total_seconds())
    for args in (["--limiters-older-than", "30m"], ["--limiters-older-than", "30m", "--dry-run"]):
        with pytest.raises(CommandError, match=r"--limiters-older-than: .*longest rate period"):
            run(*args)
    assert keys() == {"r:old"}
