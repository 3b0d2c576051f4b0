"""Enqueue: one INSERT in the caller's transaction, validated before anything is written."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from testapp import jobs

from django_leasejobs import JobValidationError, UnknownJobError, protocol
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Status

from ..conftest import race

pytestmark = pytest.mark.django_db


def test_enqueue_persists_a_pending_job_with_the_decorator_defaults() -> None:
    job = jobs.add.enqueue(1, b=2)
    row = Job.objects.get(pk=job.pk)
    assert (row.name, row.args, row.kwargs) == ("testapp.jobs.add", [1], {"b": 2})
    assert (row.status, row.queue, row.priority, row.attempt) == (Status.PENDING, "default", 0, 0)
    assert row.max_attempts == 5
    assert row.run_at is not None
    assert row.created_at is not None
    assert job.run_at == row.run_at  # returned from the INSERT, not guessed


def test_run_at_defaults_to_the_database_clock() -> None:
    before = db_now()
    job = jobs.noop.enqueue()
    after = db_now()
    assert before <= job.run_at <= after


def test_options_override_the_decorator() -> None:
    when = timezone.now() + dt.timedelta(hours=1)
    job = jobs.other_queue.enqueue(
        run_at=when, priority=-3, queue="special", max_attempts=9, dedupe_key="k1"
    )
    row = Job.objects.get(pk=job.pk)
    assert (row.queue, row.priority, row.max_attempts, row.dedupe_key) == ("special", -3, 9, "k1")
    assert row.run_at == when


def test_decorator_queue_and_priority_are_used() -> None:
    row = Job.objects.get(pk=jobs.other_queue.enqueue().pk)
    assert (row.queue, row.priority) == ("other", 5)


def test_delay_is_added_to_the_database_clock() -> None:
    before = db_now()
    job = jobs.noop.enqueue(delay=dt.timedelta(minutes=10))
    assert before + dt.timedelta(minutes=10) <= job.run_at <= db_now() + dt.timedelta(minutes=10)
    job2 = jobs.noop.enqueue(delay=30)
    assert job2.run_at - before >= dt.timedelta(seconds=30)


def test_a_rolled_back_transaction_leaves_no_job() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.noop.enqueue()
        raise RuntimeError("rollback")
    assert Job.objects.count() == 0


def test_on_commit_enqueue_is_supported(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
        transaction.on_commit(lambda: jobs.noop.enqueue())
        assert Job.objects.count() == 0
    assert len(callbacks) == 1
    assert Job.objects.count() == 1


class Unserialisable:
    pass


def _contains_itself() -> list[object]:
    value: list[object] = [1]
    value.append(value)
    return value


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((Unserialisable(),), {}, "not JSON"),
        ((), {"when": dt.datetime(2026, 1, 1)}, "not JSON"),
        ((Decimal("1.5"),), {}, "not JSON"),
        ((b"bytes",), {}, "not JSON"),
        ((float("nan"),), {}, "NaN or Infinity"),
        ((), {"x": math.inf}, "NaN or Infinity"),
        (("a\x00b",), {}, "NUL"),
        (({"k\x00": 1},), {}, "NUL"),
        (({1: "int key"},), {}, "keys must be strings"),
        (([[[{"deep": {1}}]]],), {}, "not JSON"),
        ((_contains_itself(),), {}, "contains itself"),
        ((_nested(5000),), {}, "nests deeper than 31 levels"),
        ((_nested(30),), {}, "nests deeper than 31 levels"),
    ],
)
def test_arguments_must_be_plain_json(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        jobs.record.enqueue(*args, **kwargs)
    assert Job.objects.count() == 0


def test_arguments_nested_up_to_the_limit_are_stored_and_claimed() -> None:
    """args is the first level: args holding 30 nested lists is 31 levels, the limit (and the
    deepest JSON MariaDB stores)."""
    job = jobs.add.enqueue(_nested(29), 0)
    (claimed,) = protocol.claim("w1", batch=1)
    assert claimed.pk == job.pk
    assert claimed.args == [_nested(29), 0]


@override_settings(LEASEJOBS_MAX_PAYLOAD_BYTES=100)
def test_payload_over_the_cap_is_refused() -> None:
    jobs.record.enqueue("x" * 50)
    with pytest.raises(JobValidationError, match="over LEASEJOBS_MAX_PAYLOAD_BYTES"):
        jobs.record.enqueue("x" * 200)
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"priority": 101}, "out of range"),
        ({"priority": -101}, "out of range"),
        ({"priority": "high"}, "must be an integer"),
        ({"priority": True}, "must be an integer"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"queue": ""}, "not a valid queue"),
        ({"queue": "has space"}, "not a valid queue"),
        ({"queue": "default\n"}, r"queue 'default\\n' is not a valid queue"),
        ({"dedupe_key": ""}, "dedupe_key"),
        ({"dedupe_key": "x" * 201}, "dedupe_key"),
        ({"run_at": dt.datetime(2030, 1, 1)}, "naive datetime"),
        ({"run_at": "2030-01-01"}, "must be a datetime"),
        ({"delay": -1}, "non-negative"),
        ({"delay": "soon"}, "seconds or a timedelta"),
        ({"delay": 1, "run_at": timezone.now()}, "not both"),
    ],
)
def test_bad_options_are_refused(options: dict, message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        jobs.noop.enqueue(**options)
    assert Job.objects.count() == 0


def test_unknown_job_name_is_refused() -> None:
    with pytest.raises(UnknownJobError, match=r"No job is registered as 'nope\.nothing'"):
        protocol.enqueue("nope.nothing")
    assert Job.objects.count() == 0


def test_unknown_enqueue_option_is_refused() -> None:
    with pytest.raises(JobValidationError, match="Unknown enqueue options: colour"):
        protocol.enqueue("testapp.jobs.noop", (), {}, colour="red")


def test_dedupe_returns_the_live_job_and_creates_nothing() -> None:
    first = jobs.noop.enqueue(dedupe_key="daily-report")
    second = jobs.noop.enqueue(dedupe_key="daily-report")
    assert second.pk == first.pk
    assert Job.objects.count() == 1


def test_dedupe_applies_to_live_jobs_only() -> None:
    first = jobs.noop.enqueue(dedupe_key="k")
    (claimed,) = protocol.claim("w", batch=1)
    assert protocol.complete(claimed.pk, claimed.attempt) is protocol.Outcome.SUCCEEDED
    again = jobs.noop.enqueue(dedupe_key="k")
    assert again.pk != first.pk
    cancelled = jobs.noop.enqueue(dedupe_key="c")
    assert protocol.cancel(cancelled.pk)
    assert jobs.noop.enqueue(dedupe_key="c").pk != cancelled.pk


def test_retry_of_a_deduped_job_keeps_its_key_without_tripping_the_constraint(make_due) -> None:
    job = jobs.always_fails.enqueue(dedupe_key="retry-me")
    for attempt in range(1, 3):
        make_due(job)
        (claimed,) = protocol.claim("w", batch=1)
        assert claimed.attempt == attempt
        outcome = protocol.fail(claimed.pk, claimed.attempt, protocol.Failure("x"))
        assert outcome is protocol.Outcome.RETRIED
        assert jobs.always_fails.enqueue(dedupe_key="retry-me").pk == job.pk


def test_enqueue_many_inserts_in_order_and_validates_everything_first() -> None:
    items = [((1, 2), {}), {"args": [3], "kwargs": {"b": 4}, "priority": 7}, ([5, 6], {})]
    created = jobs.add.enqueue_many(items)
    assert [job.args for job in created] == [[1, 2], [3], [5, 6]]
    assert [job.pk for job in created] == sorted(job.pk for job in created)
    assert Job.objects.get(pk=created[1].pk).priority == 7
    with pytest.raises(JobValidationError, match="NaN"):
        jobs.add.enqueue_many([((1, 2), {}), ((float("nan"), 1), {})])
    assert Job.objects.count() == 3


def test_enqueue_many_with_dedupe_keys_and_delays() -> None:
    existing = jobs.noop.enqueue(dedupe_key="one")
    created = jobs.noop.enqueue_many(
        [{"dedupe_key": "one"}, {"dedupe_key": "two"}, {"delay": 60}, ((), {})]
    )
    assert created[0].pk == existing.pk
    assert created[1].dedupe_key == "two"
    assert created[2].run_at > created[3].run_at
    assert Job.objects.count() == 4


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"args": [], "colour": 1}], "Unknown keys"),
        (["just a string"], "pairs or dicts"),
        ([((), {}, {})], "pairs or dicts"),
    ],
)
def test_enqueue_many_bad_items(items: list, message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        jobs.noop.enqueue_many(items)
    assert Job.objects.count() == 0


def test_enqueue_many_empty() -> None:
    assert jobs.noop.enqueue_many([]) == []


def test_job_is_still_callable_inline() -> None:
    assert jobs.add(2, 3) == 5
    assert jobs.add.name == "testapp.jobs.add"


def test_nested_functions_cannot_be_registered() -> None:
    from django_leasejobs import job

    def outer() -> None:
        @job
        def inner() -> None:
            pass

    with pytest.raises(ValueError, match="module-level function"):
        outer()


@pytest.mark.django_db(transaction=True)
def test_racing_producers_with_one_dedupe_key_get_one_job() -> None:
    def produce() -> int:
        with transaction.atomic():
            return jobs.noop.enqueue(dedupe_key="race").pk

    ids = race(*[produce] * 8)
    assert len(ids) == 8
    assert len(set(ids)) == 1
    assert Job.objects.filter(dedupe_key="race").count() == 1
