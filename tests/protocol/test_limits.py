"""Concurrency and rate limits in the claim: what may start does, the rest waits unchanged."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db.models import Count
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Job, Limiter, Status
from django_leasejobs.protocol.base import job_database

from ..conftest import shifted

pytestmark = pytest.mark.django_db


def running_per_key() -> Counter[str]:
    rows = (
        Job.objects.filter(status=Status.RUNNING, concurrency_key__isnull=False)
        .values_list("concurrency_key")
        .annotate(n=Count("id"))
    )
    return Counter({key: n for key, n in rows})


def waiting_unchanged(before: dict[int, dict[str, Any]]) -> None:
    """Jobs held back by a limit: still waiting, never failed, rescheduled or charged."""
    for job_id, row in before.items():
        now = Job.objects.filter(pk=job_id).values(*row).get()
        assert now == row, f"job {job_id} changed while held back"


def snapshot(ids: list[int]) -> dict[int, dict[str, Any]]:
    cols = ("status", "attempt", "run_at", "lease_owner", "errors", "last_error")
    return {row["id"]: row for row in Job.objects.filter(pk__in=ids).values("id", *cols)}


def test_enqueue_stores_the_keys_and_limits() -> None:
    a = jobs.per_customer.enqueue(7)
    b = jobs.per_customer.enqueue(customer_id=8, priority=3)
    c = jobs.one_at_a_time.enqueue()
    d = jobs.per_tenant.enqueue("acme")
    e = jobs.throttled_per_account.enqueue("x")
    f = jobs.noop.enqueue()
    many = jobs.per_customer.enqueue_many([((9,), {}), {"args": [10], "priority": 5}])
    columns = ("concurrency_key", "concurrency_limit", "rate_key", "rate_limit", "rate_period")
    stored = {
        j.pk: Job.objects.filter(pk=j.pk).values_list(*columns).get()
        for j in (a, b, c, d, e, f, *many)
    }
    assert stored[a.pk] == ("customer:7", 2, None, None, None)
    assert stored[b.pk] == ("customer:8", 2, None, None, None)
    assert stored[c.pk] == ("testapp.jobs.one_at_a_time", 1, None, None, None)
    assert stored[d.pk] == ("tenant:acme", 1, None, None, None)
    assert stored[e.pk] == (None, None, "account:x", 3, 3600)
    assert stored[f.pk] == (None, None, None, None, None)
    assert [stored[j.pk][0] for j in many] == ["customer:9", "customer:10"]


def test_claim_starts_at_most_the_limit_per_key(all_due: Callable[[], None]) -> None:
    for customer in (1, 2, 3):
        jobs.per_customer.enqueue_many([((customer,), {})] * 5)
    all_due()
    claimed = protocol.claim("w1", batch=20)
    assert Counter(j.concurrency_key for j in claimed) == {
        "customer:1": 2,
        "customer:2": 2,
        "customer:3": 2,
    }
    held = list(Job.objects.filter(status=Status.PENDING).values_list("pk", flat=True))
    before = snapshot(held)
    assert protocol.claim("w2", batch=20) == []
    waiting_unchanged(before)
    # A finished job frees its slot for one more of its key, and only that key.
    protocol.complete(claimed[0].pk, claimed[0].attempt)
    again = protocol.claim("w2", batch=20)
    assert [j.concurrency_key for j in again] == [claimed[0].concurrency_key]
    assert max(running_per_key().values()) == 2


def test_limit_without_a_key_applies_to_the_job_name(all_due: Callable[[], None]) -> None:
    jobs.one_at_a_time.enqueue_many([((), {})] * 3)
    all_due()
    assert len(protocol.claim("w1", batch=3)) == 1
    assert protocol.claim("w2", batch=3) == []


def test_an_expired_lease_frees_its_slot_only_when_recovered(
    all_due: Callable[[], None], expire_lease: Callable[..., None]
) -> None:
    jobs.per_tenant.enqueue_many([(("t",), {})] * 2)
    all_due()
    [first] = protocol.claim("w1", batch=2)
    expire_lease(first)
    assert protocol.claim("w2", batch=2) == [], "an expired lease holds its slot until recovered"
    protocol.recover_expired()
    all_due()  # the recovered job's backoff is over too
    [second] = protocol.claim("w2", batch=1)
    assert second.concurrency_key == "tenant:t"
    assert running_per_key() == {"tenant:t": 1}


def test_priority_holds_within_what_may_run(all_due: Callable[[], None]) -> None:
    top = jobs.per_tenant.enqueue_many([{"args": ["hot"], "priority": 9}] * 3)
    middle = jobs.noop.enqueue(priority=5)
    cold = jobs.per_tenant.enqueue("cold", priority=3)
    low = jobs.noop.enqueue(priority=1)
    all_due()
    claimed = protocol.claim("w1", batch=3)
    # One "hot" job may run; then the next best that may: unlimited, then "cold".
    assert [j.pk for j in claimed] == [top[0].pk, middle.pk, cold.pk]
    assert [j.pk for j in protocol.claim("w1", batch=3)] == [low.pk]


def test_a_full_keys_backlog_does_not_hold_other_keys_back(all_due: Callable[[], None]) -> None:
    # Far more waiting jobs of one full key, ahead of the others, than a claim reads.
    jobs.per_tenant.enqueue_many([{"args": ["hot"], "priority": 9}] * 60)
    others = jobs.per_tenant.enqueue_many([((f"t{i}",), {}) for i in range(4)])
    plain = jobs.noop.enqueue(priority=-5)
    all_due()
    [hot] = protocol.claim("w1", batch=1)
    assert hot.concurrency_key == "tenant:hot"
    claimed = protocol.claim("w2", batch=10)
    assert {j.pk for j in claimed} == {*(j.pk for j in others), plain.pk}


def test_jobs_without_limits_keep_their_claim(all_due: Callable[[], None]) -> None:
    plain = jobs.noop.enqueue_many([((), {})] * 3)
    all_due()
    assert [j.pk for j in protocol.claim("w1", batch=5)] == [j.pk for j in plain]


def test_rate_limit_starts_at_most_the_rate_per_window(all_due: Callable[[], None]) -> None:
    enqueued = jobs.throttled.enqueue_many([((n,), {}) for n in range(8)])
    all_due()
    assert len(protocol.claim("w1", batch=10)) == 5
    held = [j.pk for j in enqueued if Job.objects.get(pk=j.pk).status == Status.PENDING]
    before = snapshot(held)
    assert protocol.claim("w2", batch=10) == []
    waiting_unchanged(before)
    bucket = Limiter.objects.get(key="r:testapp.jobs.throttled")
    assert (bucket.started, bucket.blocked_until is not None) == (5, True)
    # The window passes: its start moves a period into the past (database time, no sleep).
    Limiter.objects.filter(pk=bucket.pk).update(
        window_start=shifted(-60 * 2), blocked_until=shifted(-60)
    )
    assert len(protocol.claim("w2", batch=10)) == 3
    assert Limiter.objects.get(pk=bucket.pk).started == 3


def test_starts_count_in_the_window_they_happened_in(all_due: Callable[[], None]) -> None:
    """A claim reads its bucket with one statement's clock and starts its jobs with the next
    one's, so a claim that read its bucket just before the minute ended may start its jobs in
    the next minute. Here the bucket's clock reads a minute early: the five starts must fill
    the minute they happened in, or the next claim starts more in that same minute."""
    from django_leasejobs.dialects import for_alias
    from django_leasejobs.dialects.base.within_limits import window_start

    real = for_alias(job_database())

    class EarlyBucketClock(type(real)):
        def _limiter_state(self, alias: str, ckeys: set[str], rkeys: set[str]) -> Any:
            running, buckets = super()._limiter_state(alias, ckeys, rkeys)
            early = {k: b._replace(now=b.now - dt.timedelta(minutes=1)) for k, b in buckets.items()}
            return running, early

    jobs.throttled.enqueue_many([((n,), {}) for n in range(8)])
    all_due()
    first = EarlyBucketClock().claim_limited(job_database(), "w1", None, 10, 60.0)
    assert len(first) == 5
    rest = protocol.claim("w2", batch=10)
    per_minute = Counter(window_start(j.started_at, 60) for j in [*first, *rest] if j.started_at)
    assert sum(per_minute.values()) == len(first) + len(rest)
    assert max(per_minute.values()) <= 5, per_minute


def test_the_counts_that_decide_are_read_after_the_locks(all_due: Callable[[], None]) -> None:
    """A claim may read its candidates (and on PostgreSQL their keys' state too) before it
    holds their keys' locks: another claimer's starts that committed in between are not in
    that read. Here they are made right after the locks are taken, in the claim's own
    transaction (which its later statements see, as they would see them committed): two more
    jobs of the key running, and the rate bucket filled. The claim must start none."""
    from django_leasejobs.db.dbtime import db_now
    from django_leasejobs.dialects import for_alias
    from django_leasejobs.dialects.base.within_limits import window_start

    real = for_alias(job_database())

    class StartsCommittedMeanwhile(type(real)):
        def _start_within_limits(self, alias: str, *args: Any) -> Any:
            # Right after the locks, before the counts: the claim's own hook for that moment.
            last_two = keyed.order_by("-pk").values_list("pk", flat=True)[:2]
            assert Job.objects.filter(pk__in=list(last_two)).update(status=Status.RUNNING) == 2
            Limiter.objects.update_or_create(
                key="r:testapp.jobs.throttled",
                defaults={
                    "name": "testapp.jobs.throttled",
                    "window_start": window_start(db_now(), 60),
                    "started": 5,
                },
            )
            return super()._start_within_limits(alias, *args)

    jobs.per_customer.enqueue_many([((1,), {})] * 4)
    keyed = Job.objects.filter(concurrency_key="customer:1")
    throttled = [j.pk for j in jobs.throttled.enqueue_many([((n,), {}) for n in range(8)])]
    all_due()
    assert StartsCommittedMeanwhile().claim_limited(job_database(), "w1", None, 20, 60.0) == []
    assert keyed.filter(status=Status.RUNNING).count() == 2
    assert keyed.filter(status=Status.PENDING).count() == 2
    assert Job.objects.filter(pk__in=throttled, status=Status.PENDING).count() == 8
    assert Limiter.objects.get(key="r:testapp.jobs.throttled").started == 5


def test_rate_limit_per_key(all_due: Callable[[], None]) -> None:
    for account in ("a", "b"):
        jobs.throttled_per_account.enqueue_many([((account,), {})] * 5)
    all_due()
    claimed = protocol.claim("w1", batch=20)
    assert Counter(j.rate_key for j in claimed) == {"account:a": 3, "account:b": 3}
    assert protocol.claim("w1", batch=20) == []


def test_both_limits_at_once(all_due: Callable[[], None]) -> None:
    for customer in range(6):
        jobs.limited_both.enqueue_many([((customer,), {})] * 2)
    all_due()
    claimed = protocol.claim("w1", batch=20)
    assert len(claimed) == 4  # the rate: four starts a minute
    assert len({j.concurrency_key for j in claimed}) == 4  # one per customer
    for job in claimed:
        protocol.complete(job.pk, job.attempt)
    assert protocol.claim("w1", batch=20) == []  # the rate, not the slots, holds them now


def test_bucket_windows_align_to_the_epoch() -> None:
    from django_leasejobs.dialects.base.within_limits import Bucket, room, window_start

    now = dt.datetime(2030, 1, 1, 12, 34, 56, 789000, tzinfo=dt.timezone.utc)
    assert window_start(now, 60) == now.replace(second=0, microsecond=0)
    assert window_start(now, 3600) == now.replace(minute=0, second=0, microsecond=0)
    assert window_start(now, 1) == now.replace(microsecond=0)
    this_minute = window_start(now, 60)
    assert room(Bucket(this_minute, 3, now), 5, 60) == 2
    assert room(Bucket(this_minute, 7, now), 5, 60) == 0
    assert room(Bucket(this_minute - dt.timedelta(minutes=1), 5, now), 5, 60) == 5
    assert room(Bucket(None, 0, now), 5, 60) == 5
