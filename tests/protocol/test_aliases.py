"""Renames: ``@job(aliases=[...])`` makes rows under a former name run on the renamed job, and
the claim, enqueue, replay, results, schedules, dedupe keys and the HTTP API's filter resolve it;
``leasejobs.E014`` refuses an alias that is also a registered name or listed by two jobs."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.checks import run_checks

from django_leasejobs import job, protocol
from django_leasejobs.core import registry
from django_leasejobs.models import DeadLetter, Job, Schedule, Status
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.runtime import execution

from ..conftest import fields

pytestmark = pytest.mark.django_db

OLD = "tests.shop.jobs.send_receipt"
NEW = "tests.billing.jobs.email_receipt"
CALLS: list[Any] = []


def email_receipt(order_id: int) -> None:
    CALLS.append(order_id)


def keyed_receipt(order_id: int) -> None:
    CALLS.append(order_id)


def other(order_id: int) -> None:
    CALLS.append(("other", order_id))


@pytest.fixture(autouse=True)
def renamed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The renamed job, registered in a registry of the test's own."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))
    monkeypatch.setattr(registry, "_duplicates", set(registry._duplicates))
    CALLS.clear()
    return job(name=NEW, aliases=[OLD])(email_receipt)


def run_one() -> Outcome:
    (row,) = protocol.claim("w1", batch=1)
    return execution.run(row, "w1")


def test_the_registry_resolves_a_former_name(renamed) -> None:
    assert registry.lookup(OLD) is renamed
    assert registry.get(OLD) is renamed
    assert registry.find(OLD) is renamed
    assert registry.canonical(OLD) == NEW
    assert registry.canonical("tests.nothing") == "tests.nothing"
    assert registry.names_of(OLD) == (NEW, OLD)
    assert registry.runnable()[OLD] == registry.runnable()[NEW] == 1


def test_a_row_under_the_former_name_runs_on_the_renamed_job() -> None:
    row = Job.objects.create(name=OLD, args=[7])  # queued by the previous release
    assert run_one() is Outcome.SUCCEEDED
    assert CALLS == [7]
    assert fields(row.pk, "status", "name") == {"status": Status.SUCCEEDED, "name": OLD}


def test_an_enqueue_under_the_former_name_stores_the_new_one(renamed) -> None:
    row = protocol.enqueue(OLD, [7])
    assert fields(row.pk, "name") == {"name": NEW}
    (bulk,) = protocol.enqueue_many(OLD, [([8], {})])
    assert fields(bulk.pk, "name") == {"name": NEW}


def test_a_former_name_deferred_is_woken_by_a_worker_with_the_alias() -> None:
    row = Job.objects.create(name=OLD, args=[7])
    (claimed,) = protocol.claim("old", batch=1)
    failure = Failure("No job is registered as it.", kind="unregistered job")
    outcome = protocol.defer(
        claimed.pk,
        claimed.attempt,
        failure,
        deferrals=0,
        grace=dt.timedelta(hours=1),
        worker_id="old",
        reason="not here",
    )
    assert outcome is Outcome.RELEASED
    assert protocol.wake_deferred(registry.runnable()) == 1
    assert run_one() is Outcome.SUCCEEDED
    assert fields(row.pk, "status")["status"] == Status.SUCCEEDED


def test_a_dead_letter_under_the_former_name_replays_on_the_renamed_job() -> None:
    row = Job.objects.create(name=OLD, args=[7], max_attempts=1)
    (claimed,) = protocol.claim("w1", batch=1)
    assert protocol.fail(claimed.pk, claimed.attempt, Failure("boom")) is Outcome.DEAD
    letter = DeadLetter.objects.get(job_id=row.pk)
    assert letter.name == OLD
    replayed = protocol.replay(letter.pk)
    assert fields(replayed.pk, "name", "args") == {"name": NEW, "args": [7]}
    assert run_one() is Outcome.SUCCEEDED
    assert CALLS == [7]


def test_get_result_finds_a_row_under_the_former_name(renamed) -> None:
    row = Job.objects.create(name=OLD, args=[7])
    assert renamed.get_result(row.pk).pk == row.pk


def test_a_dedupe_key_held_under_the_former_name_is_matched(renamed) -> None:
    held = Job.objects.create(
        name=OLD, args=[7], dedupe_key="receipt:7", live_dedupe_key="receipt:7"
    )
    found = renamed.using(dedupe_key="receipt:7").enqueue(7)
    assert found.pk == held.pk
    assert Job.objects.count() == 1
    found = protocol.enqueue(OLD, [7], dedupe_key="receipt:7")  # an old producer, too
    assert found.pk == held.pk
    assert Job.objects.count() == 1


def test_a_template_key_held_under_the_former_name_is_matched() -> None:
    registry._registry.pop(NEW)
    keyed = job(name=NEW, aliases=[OLD], dedupe_key="receipt:{order_id}")(keyed_receipt)
    held = Job.objects.create(
        name=OLD, args=[7], dedupe_key="receipt:7", live_dedupe_key="receipt:7"
    )
    assert keyed.enqueue(7).pk == held.pk
    assert keyed.enqueue(8).pk != held.pk
    assert Job.objects.count() == 2


def test_a_hashed_key_made_under_the_former_name_is_matched() -> None:
    registry._registry.pop(NEW)
    job(name=OLD, dedupe_key=True)(keyed_receipt)  # the release before the rename
    held = protocol.enqueue(OLD, [7])
    assert held.dedupe_key.startswith("args:")
    registry._registry.pop(OLD)
    renamed = job(name=NEW, aliases=[OLD], dedupe_key=True)(keyed_receipt)
    assert renamed.enqueue(7).pk == held.pk
    assert renamed.using(dedupe_key=True).enqueue(7).pk == held.pk
    other_call = renamed.enqueue(8)
    assert other_call.pk != held.pk
    assert fields(other_call.pk, "name") == {"name": NEW}
    assert Job.objects.count() == 2


def test_another_jobs_key_is_still_never_matched() -> None:
    job(name="tests.other")(other)
    Job.objects.create(name="tests.other", dedupe_key="receipt:7", live_dedupe_key="receipt:7")
    new = protocol.enqueue(OLD, [7], dedupe_key="receipt:7")
    assert fields(new.pk, "name") == {"name": NEW}
    assert Job.objects.count() == 2


def test_e014_an_alias_that_is_a_registered_name() -> None:
    assert not [m for m in run_checks() if m.id == "leasejobs.E014"]
    job(name=OLD)(other)  # the old job is still registered beside its alias
    (message,) = [m for m in run_checks() if m.id == "leasejobs.E014"]
    assert f"{OLD!r} is a registered job and also an alias of {NEW!r}" in message.msg
    assert registry.lookup(OLD).func is other  # the registered name wins meanwhile


def test_e014_an_alias_listed_by_two_jobs() -> None:
    job(name="tests.other", aliases=[OLD])(other)
    (message,) = [m for m in run_checks() if m.id == "leasejobs.E014"]
    assert f"{OLD!r} is an alias of several jobs" in message.msg
    assert repr(NEW) in message.msg
    assert "'tests.other'" in message.msg


def test_a_schedule_under_the_former_name_emits_the_renamed_job() -> None:
    schedule = Schedule.objects.create(name="receipts", cron="0 * * * *", job=OLD, args=[7])
    assert schedule.problems() == {}
    occurrence = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    emitted = protocol.emit_occurrence(schedule, occurrence, occurrence)
    assert emitted is not None
    assert fields(emitted.pk, "name", "args") == {"name": NEW, "args": [7]}
