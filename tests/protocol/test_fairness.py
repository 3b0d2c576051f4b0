"""Fair keys in the claim order: keys interleave, weights share, the rest keeps its order."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest
from django.db.models import F
from django.test import override_settings
from testapp import jobs

from django_leasejobs import Workflow, protocol
from django_leasejobs.core.fairness import STEP
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome

pytestmark = pytest.mark.django_db

HOUR = dt.timedelta(hours=1)


def back_an_hour() -> None:
    """Every waiting job an hour earlier, their order kept: all of them due now, whatever
    places an enqueue gave a little ahead of the clock."""
    waiting = Job.objects.filter(status__in=["pending", "failed"])
    waiting.update(run_at=F("run_at") - HOUR)
    waiting.filter(fair_at__isnull=False).update(fair_at=F("fair_at") - HOUR)


def claimed_one_by_one(count: int) -> list[Job]:
    """What one thread claiming a job at a time starts, in order."""
    claimed: list[Job] = []
    for _ in range(count):
        batch = protocol.claim("w1", batch=1)
        if not batch:
            break
        claimed.extend(batch)
    return claimed


def test_newcomers_start_among_the_next_claims_not_behind_a_backlog() -> None:
    jobs.per_account.enqueue_many([(("big",), {"n": n}) for n in range(300)])
    back_an_hour()
    newcomers = [jobs.per_account.enqueue(f"small-{i}") for i in range(20)]
    order = [job.pk for job in claimed_one_by_one(40)]
    positions = [order.index(job.pk) for job in newcomers]
    # Behind the head's one job, in the order they came: within the next 21 runs.
    assert positions == list(range(1, 21))
    assert Counter(job.fair_key for job in Job.objects.filter(pk__in=order[21:])) == {
        "account:big": 19
    }


def test_keys_enqueued_together_alternate() -> None:
    for account in ("a", "b", "c"):
        jobs.per_account.enqueue_many([((account,), {"n": n}) for n in range(10)])
    back_an_hour()
    keys = [job.fair_key for job in claimed_one_by_one(30)]
    for start in range(0, 30, 3):
        assert sorted(keys[start : start + 3]) == ["account:a", "account:b", "account:c"]


def test_a_heavier_key_gets_its_share_while_both_wait() -> None:
    jobs.per_account.using(fair_key="heavy", fair_weight=2).enqueue_many(
        [(("x",), {"n": n}) for n in range(100)]
    )
    jobs.per_account.enqueue_many([(("light",), {"n": n}) for n in range(100)])
    back_an_hour()
    first = claimed_one_by_one(90)
    share = Counter(job.fair_key for job in first)["heavy"] / len(first)
    assert share == pytest.approx(2 / 3)
    assert Job.objects.filter(fair_key="heavy").values_list("fair_weight").distinct().get() == (2,)


def test_priority_comes_first() -> None:
    jobs.per_account.enqueue_many([(("big",), {"n": n}) for n in range(50)])
    urgent = jobs.per_account.using(priority=5).enqueue("big", 99)
    back_an_hour()
    assert claimed_one_by_one(1)[0].pk == urgent.pk


def test_a_later_run_at_is_kept_and_takes_no_place() -> None:
    later = jobs.per_account.using(delay=3 * 3600).enqueue("a")
    jobs.per_account.enqueue_many([(("a",), {"n": n}) for n in range(5)])
    row = Job.objects.get(pk=later.pk)
    assert row.fair_at is None
    assert row.fair_key == "account:a"
    assert row.run_at == later.run_at
    # The delayed job holds no place: the key's due jobs are not pushed an hour out.
    waiting = Job.objects.exclude(pk=later.pk)
    assert all(job.fair_at == job.run_at for job in waiting)
    assert max(job.run_at for job in waiting) < row.run_at - dt.timedelta(minutes=59)
    back_an_hour()
    assert later.pk not in {job.pk for job in claimed_one_by_one(10)}


def test_jobs_without_a_key_keep_their_run_at() -> None:
    plain = jobs.noop.enqueue()
    jobs.per_account.enqueue_many([(("a",), {"n": n}) for n in range(5)])
    plain_later = jobs.noop.enqueue()
    plain_many = jobs.noop.enqueue_many([((), {}), ((), {})])
    rows = Job.objects.filter(pk__in=[plain.pk, plain_later.pk, *(j.pk for j in plain_many)])
    assert {(job.fair_key, job.fair_at, job.fair_weight) for job in rows} == {(None, None, None)}
    # Due at their enqueue's own time, as they always were: none moved to a place.
    single = rows.filter(pk__in=[plain.pk, plain_later.pk])
    assert all(job.run_at == job.created_at for job in single)
    bulk = list(rows.exclude(pk__in=[plain.pk, plain_later.pk]))
    assert bulk[0].run_at == bulk[1].run_at <= bulk[0].created_at


def test_a_key_at_its_concurrency_limit_is_passed_over() -> None:
    jobs.per_account_one_at_a_time.enqueue_many([(("big",), {"n": n}) for n in range(30)])
    back_an_hour()
    others = [jobs.per_account_one_at_a_time.enqueue(f"small-{i}") for i in range(3)]
    claimed = protocol.claim("w1", batch=10)
    assert Counter(job.concurrency_key for job in claimed) == {
        "account:big": 1,
        "account:small-0": 1,
        "account:small-1": 1,
        "account:small-2": 1,
    }
    assert {job.pk for job in others} <= {job.pk for job in claimed}


def test_a_key_at_its_rate_limit_is_passed_over() -> None:
    jobs.per_account_throttled.enqueue_many([(("big",), {"n": n}) for n in range(30)])
    back_an_hour()
    small = jobs.per_account_throttled.enqueue("small")
    claimed = protocol.claim("w1", batch=10)
    assert Counter(job.rate_key for job in claimed) == {"account:big": 2, "account:small": 1}
    assert small.pk in {job.pk for job in claimed}


def test_a_dedupe_key_returns_the_live_job_of_a_fair_key() -> None:
    first = jobs.per_account.using(dedupe_key="once").enqueue("a")
    again = jobs.per_account.using(dedupe_key="once").enqueue("a")
    assert again.pk == first.pk
    assert Job.objects.count() == 1
    row = Job.objects.get(pk=first.pk)
    assert row.fair_at == row.run_at == first.run_at  # the holder keeps its place


def test_a_retry_is_ordered_by_its_backoff_not_its_old_place() -> None:
    job = jobs.per_account.enqueue("a")
    back_an_hour()
    [claimed] = protocol.claim("w1", batch=1)
    failure = Failure("RuntimeError: boom", kind="exception")
    assert protocol.fail(claimed.pk, claimed.attempt, failure, when=600.0) is Outcome.RETRIED
    row = Job.objects.get(pk=job.pk)
    assert row.status == Status.FAILED
    assert row.run_at > row.fair_at + HOUR


@pytest.mark.parametrize(
    "options",
    [
        {"fair_weight": 0},
        {"fair_weight": 101},
        {"fair_weight": "2"},
        {"fair_weight": True},
        {"fair_weight": 1.5},
        {"fair_key": ""},
        {"fair_key": "x" * 201},
        {"fair_key": "a\x00b"},
        {"fair_key": 7},
    ],
)
def test_bad_fair_options_are_refused_and_nothing_is_written(options: dict) -> None:
    with pytest.raises(JobValidationError, match="fair_"):
        jobs.per_account.using(**options).enqueue("a")
    with pytest.raises(JobValidationError, match="fair_"):
        jobs.per_account.enqueue("a", **options)
    with pytest.raises(JobValidationError, match="fair_"):
        jobs.per_account.enqueue_many([{"args": ["a"]}, {"args": ["b"], **options}])
    assert not Job.objects.exists()


def test_a_weight_needs_a_key() -> None:
    with pytest.raises(JobValidationError, match="fair_weight needs a fair_key"):
        jobs.noop.using(fair_weight=2).enqueue()
    assert not Job.objects.exists()


def test_a_replay_takes_a_place_in_its_keys_line() -> None:
    job = jobs.per_account.using(max_attempts=1).enqueue("a")
    back_an_hour()
    (claimed,) = protocol.claim("w1", batch=1)
    assert protocol.fail(claimed.pk, claimed.attempt, Failure("boom")) is Outcome.DEAD
    jobs.per_account.enqueue_many([(("a",), {"n": n}) for n in range(3)])
    letter = DeadLetter.objects.get(job_id=job.pk)
    replayed = Job.objects.get(pk=protocol.replay(letter.pk).pk)
    last = Job.objects.filter(fair_key="account:a", status=Status.PENDING).exclude(pk=replayed.pk)
    assert replayed.fair_key == "account:a"
    assert replayed.fair_at == replayed.run_at == max(j.fair_at for j in last) + STEP


@pytest.mark.parametrize("fair_first", [True, False])
def test_enqueue_many_mixes_items_with_and_without_a_key(fair_first: bool) -> None:
    """A job without a key template: one item given a key, the others none, in either order;
    each row keeps what its item said."""
    items: list[Any] = [((), {}), {"args": [], "fair_key": "acme"}, ((), {})]
    if fair_first:
        items.reverse()
    enqueued = jobs.noop.enqueue_many(items)
    stored = dict(Job.objects.values_list("pk", "fair_key"))
    assert [stored[job.pk] for job in enqueued] == [job.fair_key for job in enqueued]
    assert Counter(stored.values()) == {"acme": 1, None: 2}
    fair = Job.objects.get(fair_key="acme")
    assert fair.fair_at == fair.run_at
    assert fair.fair_weight == 1


def test_fair_jobs_without_time_zones() -> None:
    """``USE_TZ = False`` (UTC): places are naive UTC, like every other time of the row."""
    with override_settings(USE_TZ=False):
        one = jobs.per_account.enqueue("a")
        many = jobs.per_account.enqueue_many([(("a",), {"n": n}) for n in range(3)])
        later = jobs.per_account.using(delay=3600).enqueue("a")
        rows = {job.pk: job for job in Job.objects.all()}
        assert all(job.fair_at is None or job.fair_at.tzinfo is None for job in rows.values())
        places = [rows[job.pk].fair_at for job in (one, *many)]
        assert places == [places[0] + n * STEP for n in range(4)]
        assert rows[later.pk].fair_at is None
        assert rows[later.pk].run_at.tzinfo is None


def test_workflow_steps_take_their_keys_and_a_released_step_a_place_in_its_line() -> None:
    """A step's job is keyed as its enqueue would be (the decorator's template, ``.using``);
    a step released when its parent succeeds takes its place behind its key's waiting jobs."""
    first = jobs.per_account.using(max_attempts=1).enqueue("a")
    wf = Workflow("fair steps")
    parent = wf.add(jobs.per_account.si("b"))
    wf.add(jobs.account_work.using(fair_key="account:a", fair_weight=2).si("x", 1), after=[parent])
    wf.enqueue()
    (parent_job,) = Job.objects.filter(fair_key="account:b")
    assert (parent_job.fair_weight, parent_job.fair_at) == (1, parent_job.run_at)
    jobs.per_account.enqueue_many([(("a",), {"n": n}) for n in range(3)])
    back_an_hour()
    claimed = protocol.claim("w1", batch=2)
    assert [job.pk for job in claimed] == [first.pk, parent_job.pk]
    assert protocol.complete(parent_job.pk, claimed[1].attempt, None) is Outcome.SUCCEEDED
    released = Job.objects.get(name="testapp.jobs.account_work")
    line = Job.objects.filter(fair_key="account:a", status=Status.PENDING).exclude(pk=released.pk)
    assert (released.fair_key, released.fair_weight) == ("account:a", 2)
    # Its weight (2) lets it share the microsecond of the key's last job, alone there.
    assert released.fair_at == released.run_at == max(job.fair_at for job in line)
