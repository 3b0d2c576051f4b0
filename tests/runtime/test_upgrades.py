"""Versions in the worker: older rows upgraded before the call and stored only by the fenced
success write; a failing or missing upgrader dead-letters with the arguments intact; a newer
row deferred by an older worker, and woken only by a worker that runs its version."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db.models import F

from django_leasejobs import job, protocol
from django_leasejobs.core import registry
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import execution
from django_leasejobs.runtime.worker import Worker

from ..conftest import fields, shifted

pytestmark = pytest.mark.django_db

NAME = "tests.versions.ship"
CALLS: list[tuple[Any, ...]] = []


def ship_v1(order_id: int) -> None:
    CALLS.append(("v1", order_id))


def ship_v3(order: dict[str, Any], *, fast: bool) -> dict[str, Any]:
    CALLS.append(("v3", order, fast))
    return {"shipped": order["id"]}


def ship_v2(order: dict[str, Any]) -> None:
    CALLS.append(("v2", order))


def to_v2(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [{"id": args[0]}], kwargs


def to_v3(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return args, {**kwargs, "fast": False}


def broken(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    raise KeyError("customer")


def not_a_pair(args: list[Any], kwargs: dict[str, Any]) -> Any:
    return args


@pytest.fixture(autouse=True)
def versions_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry of our own for each test: a release's handler is swapped in by ``release``."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))
    CALLS.clear()


def release(version: int, **upgrade: Any) -> Any:
    """Register the handler of ``NAME`` that a release at ``version`` has (replacing any)."""
    registry._registry.pop(NAME, None)
    handler = {1: ship_v1, 2: ship_v2, 3: ship_v3}[version]
    upgrades = {1: to_v2, 2: to_v3}
    upgrades.update({int(k[1:]): v for k, v in upgrade.items()})
    chosen = {k: v for k, v in upgrades.items() if k < version}
    return job(name=NAME, version=version, upgrade=chosen or None)(handler)


def claimed() -> Job:
    (row,) = protocol.claim("w1", batch=1)
    return row


def run(row: Job) -> Outcome:
    return execution.run(row, "w1")


def test_a_row_stores_the_version_it_was_enqueued_at() -> None:
    old = release(1).enqueue(7)
    new = release(3).enqueue({"id": 8}, fast=True)
    assert fields(old.pk, "version") == {"version": 1}
    assert fields(new.pk, "version") == {"version": 3}
    assert new.version == 3
    (bulk,) = release(3).enqueue_many([([{"id": 9}], {"fast": True})])
    assert fields(bulk.pk, "version") == {"version": 3}


def test_an_old_row_is_upgraded_through_the_chain_and_stored_on_success() -> None:
    row = release(1).enqueue(7)
    release(3)
    assert run(claimed()) is Outcome.SUCCEEDED
    assert CALLS == [("v3", {"id": 7}, False)]
    stored = fields(row.pk, "status", "version", "args", "kwargs", "result")
    assert stored == {
        "status": Status.SUCCEEDED,
        "version": 3,
        "args": [{"id": 7}],
        "kwargs": {"fast": False},
        "result": {"shipped": 7},
    }


def test_a_handler_failing_on_upgraded_arguments_leaves_them_as_enqueued() -> None:
    row = release(2).enqueue({"id": 7})
    registry._registry.pop(NAME)
    job(name=NAME, version=3, upgrade={1: to_v2, 2: to_v3})(failing_v3)
    assert run(claimed()) is Outcome.RETRIED
    assert fields(row.pk, "version", "args", "kwargs") == {
        "version": 2,
        "args": [{"id": 7}],
        "kwargs": {},
    }


def failing_v3(order: dict[str, Any], *, fast: bool) -> None:
    raise RuntimeError("carrier down")


def test_a_failing_upgrader_dead_letters_the_job_with_its_arguments_intact() -> None:
    row = release(1).enqueue(7)
    release(2, v1=broken)
    assert run(claimed()) is Outcome.DEAD
    assert CALLS == []
    stored = fields(row.pk, "status", "version", "args", "kwargs", "attempt")
    assert stored == {
        "status": Status.DEAD,
        "version": 1,
        "args": [7],
        "kwargs": {},
        "attempt": 1,
    }
    letter = DeadLetter.objects.get(job_id=row.pk)
    assert letter.reason == "upgrade failed"
    assert (letter.args, letter.kwargs) == ([7], {})
    assert "KeyError" in letter.errors[-1]["error"]
    assert "customer" in letter.errors[-1]["error"]


def test_an_upgrader_returning_no_pair_is_an_upgrade_failure() -> None:
    row = release(1).enqueue(7)
    release(2, v1=not_a_pair)
    assert run(claimed()) is Outcome.DEAD
    letter = DeadLetter.objects.get(job_id=row.pk)
    assert letter.reason == "upgrade failed"
    assert "upgrade[1]" in letter.errors[-1]["error"]
    assert "not (args, kwargs)" in letter.errors[-1]["error"]


def test_an_old_row_without_an_upgrader_path_is_dead_at_once_naming_it() -> None:
    row = release(1).enqueue(7)
    # Release 3 dropped the upgrader from version 1: no version-1 row was expected any more.
    registry._registry.pop(NAME)
    job(name=NAME, version=3, upgrade={2: to_v3})(ship_v3)
    assert run(claimed()) is Outcome.DEAD
    assert CALLS == []
    letter = DeadLetter.objects.get(job_id=row.pk)
    assert letter.reason == "upgrade failed"
    error = letter.errors[-1]["error"]
    assert "no upgrader from version 1 (upgrade[1] in its @job)" in error
    assert fields(row.pk, "args", "version") == {"args": [7], "version": 1}


def test_a_newer_row_is_deferred_by_an_older_worker_never_called(caplog) -> None:
    row = release(2).enqueue({"id": 7})
    release(1)  # an old worker's code
    with caplog.at_level(logging.WARNING, logger="django_leasejobs"):
        assert run(claimed()) is Outcome.RELEASED
    assert CALLS == []
    stored = fields(row.pk, "status", "deferrals", "released", "version", "args")
    assert stored == {
        "status": Status.PENDING,
        "deferrals": 1,
        "released": 1,
        "version": 2,
        "args": [{"id": 7}],
    }
    (line,) = [r.getMessage() for r in caplog.records if "job.deferred" in r.getMessage()]
    assert f"version 2 of {NAME!r} is newer than this worker's version 1" in line
    assert not DeadLetter.objects.exists()


def test_the_wake_makes_due_only_rows_of_a_version_the_worker_runs() -> None:
    row = release(2).enqueue({"id": 7})
    release(1)
    assert run(claimed()) is Outcome.RELEASED
    assert protocol.wake_deferred({NAME: 1}) == 0  # another old worker
    assert protocol.wake_deferred({"tests.other": 5}) == 0
    assert protocol.wake_deferred(registry.runnable()) == 0  # this old worker's registry
    release(2)
    assert protocol.wake_deferred(registry.runnable()) == 1
    assert run(claimed()) is Outcome.SUCCEEDED
    assert CALLS == [("v2", {"id": 7})]
    assert fields(row.pk, "status")["status"] == Status.SUCCEEDED


def test_a_newer_row_is_dead_lettered_once_the_grace_has_passed() -> None:
    row = release(2).enqueue({"id": 7})
    release(1)
    assert run(claimed()) is Outcome.RELEASED
    Job.objects.filter(pk=row.pk).update(run_at=shifted(-1), first_deferred_at=shifted(-90000))
    assert run(claimed()) is Outcome.DEAD
    letter = DeadLetter.objects.get(job_id=row.pk)
    assert letter.reason == "unregistered job"
    assert "enqueued at version 2, newer than the version 1" in letter.errors[-1]["error"]


def test_the_success_write_of_an_upgraded_attempt_is_fenced() -> None:
    row = release(1).enqueue(7)
    release(3)
    first = claimed()
    # The lease was lost and the job claimed again: a newer attempt holds it.
    Job.objects.filter(pk=row.pk).update(attempt=F("attempt") + 1)
    second = Job.objects.get(pk=row.pk)
    assert run(first) is Outcome.STALE
    assert CALLS == [("v3", {"id": 7}, False)]  # it ran, but wrote nothing
    assert fields(row.pk, "status", "version", "args", "kwargs", "attempt") == {
        "status": Status.RUNNING,
        "version": 1,
        "args": [7],
        "kwargs": {},
        "attempt": 2,
    }
    upgraded = protocol.Upgraded(3, [{"id": 7}], {"fast": False})
    assert protocol.complete(row.pk, first.attempt, upgraded=upgraded) is Outcome.STALE
    assert fields(row.pk, "version", "args")["version"] == 1
    assert protocol.complete(row.pk, second.attempt, upgraded=upgraded) is Outcome.SUCCEEDED
    assert fields(row.pk, "version", "args") == {"version": 3, "args": [{"id": 7}]}


@pytest.mark.django_db(transaction=True)
def test_a_worker_upgrades_old_rows_and_groups_only_the_others() -> None:
    old = release(1).enqueue(7)
    current = release(3).enqueue({"id": 8}, fast=True)
    summary = Worker(concurrency=2, lease=5.0, heartbeat=0.1, poll=0.05).run(burst=True)
    assert summary.succeeded == 2
    assert sorted(CALLS, key=repr) == sorted(
        [("v3", {"id": 7}, False), ("v3", {"id": 8}, True)], key=repr
    )
    assert fields(old.pk, "version", "args", "kwargs") == {
        "version": 3,
        "args": [{"id": 7}],
        "kwargs": {"fast": False},
    }
    assert fields(current.pk, "status", "version")["status"] == Status.SUCCEEDED


async def ship_async(order: dict[str, Any]) -> str:
    CALLS.append(("async", order))
    return "shipped"


def ship_in_transaction(ctx: Any, order: dict[str, Any]) -> None:
    from django.db import transaction

    CALLS.append(("ctx", order))
    with transaction.atomic():
        ctx.complete("done in the handler's transaction")


def test_a_handler_completing_in_its_transaction_stores_the_upgraded_arguments() -> None:
    row = release(1).enqueue(7)
    registry._registry.pop(NAME)
    job(name=NAME, version=2, upgrade={1: to_v2}, takes_context=True)(ship_in_transaction)
    assert run(claimed()) is Outcome.SUCCEEDED
    assert CALLS == [("ctx", {"id": 7})]
    assert fields(row.pk, "status", "version", "args", "result") == {
        "status": Status.SUCCEEDED,
        "version": 2,
        "args": [{"id": 7}],
        "result": "done in the handler's transaction",
    }


@pytest.mark.django_db(transaction=True)
def test_an_async_handler_gets_upgraded_arguments_too() -> None:
    row = release(1).enqueue(7)
    registry._registry.pop(NAME)
    job(name=NAME, version=2, upgrade={1: to_v2})(ship_async)
    summary = Worker(lease=5.0, heartbeat=0.1, poll=0.05).run(burst=True)
    assert summary.succeeded == 1
    assert CALLS == [("async", {"id": 7})]
    assert fields(row.pk, "version", "args", "result") == {
        "version": 2,
        "args": [{"id": 7}],
        "result": "shipped",
    }
