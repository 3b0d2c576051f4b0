"""A guarded write chosen as a deadlock victim runs again; nothing else is retried.

The deadlocks here are real: two connections lock two rows in opposite orders. The victim is
made deterministic per database (see ``_patient_about_deadlocks``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest
from django.db import DatabaseError, OperationalError, connection, transaction
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db import deadlocks
from django_leasejobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _row_locks() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: two transactions cannot wait on each other")


def _lock(job_id: int) -> None:
    list(Job.objects.select_for_update().filter(pk=job_id).values_list("pk"))


def _patient_about_deadlocks() -> None:
    """PostgreSQL: let the other side of the cycle be the one to detect it (and be the victim).

    PostgreSQL checks for a deadlock in the transaction whose ``deadlock_timeout`` expires
    first; with the rival's at 30 s, that is always the write under test, however loaded the
    machine. (InnoDB detects the cycle at once and rolls back the transaction holding fewer
    locks: the rival holds more on purpose.)
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL deadlock_timeout = '30s'")


def _touch(job_id: int) -> None:
    Job.objects.filter(pk=job_id).update(priority=7)


def test_a_lock_wait_timeout_is_not_taken_for_a_deadlock() -> None:
    job_id = jobs.noop.enqueue().pk
    holding, done = threading.Event(), threading.Event()

    def holder() -> None:
        try:
            with transaction.atomic():
                _lock(job_id)
                holding.set()
                done.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait(10)
    try:
        with pytest.raises(OperationalError) as raised, transaction.atomic():
            with connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    cursor.execute("SET LOCAL lock_timeout = '100ms'")
                else:
                    cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            _touch(job_id)
    finally:
        done.set()
        thread.join(10)
        if connection.vendor != "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
    assert not deadlocks.is_deadlock(raised.value)


def _deadlocking_write(first: int, second: int, calls: list[int]) -> Callable[[], str]:
    """A write that is a deadlock victim on its first run and succeeds on its second."""
    rival_may_go = threading.Event()
    holding = threading.Event()

    def rival() -> None:
        try:
            with transaction.atomic():
                _patient_about_deadlocks()
                _touch(second)
                Job.objects.filter(pk__gt=second).update(priority=3)
                holding.set()
                rival_may_go.wait(10)
                _touch(first)
        finally:
            connection.close()

    thread = threading.Thread(target=rival)

    @deadlocks.retry_deadlocks
    def write() -> str:
        calls.append(len(calls) + 1)
        with transaction.atomic():
            _touch(first)
            if len(calls) == 1:
                thread.start()
                holding.wait(10)
                threading.Timer(0.2, rival_may_go.set).start()
            Job.objects.filter(pk=second).update(priority=9)
        return "written"

    write.rival = thread  # type: ignore[attr-defined]
    return write


def _write_that_loses_a_deadlock() -> tuple[Callable[[], str], list[int], int]:
    """Two rows and the write that deadlocks on them; the rival also holds 20 more rows."""
    first, second = jobs.noop.enqueue().pk, jobs.noop.enqueue().pk
    for _ in range(20):
        jobs.noop.enqueue()
    calls: list[int] = []
    return _deadlocking_write(first, second, calls), calls, second


def test_the_deadlock_victim_runs_again_and_its_write_lands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    write, calls, second = _write_that_loses_a_deadlock()
    with caplog.at_level(logging.WARNING, logger="django_leasejobs"):
        assert write() == "written"
    write.rival.join(30)  # type: ignore[attr-defined]
    assert calls == [1, 2]
    assert Job.objects.get(pk=second).priority == 9
    assert any("job.deadlock write=write try=1" in r.getMessage() for r in caplog.records)


def test_inside_a_callers_transaction_the_deadlock_is_passed_on() -> None:
    write, calls, _second = _write_that_loses_a_deadlock()
    with pytest.raises(OperationalError) as raised, transaction.atomic():
        write()
    write.rival.join(30)  # type: ignore[attr-defined]
    assert deadlocks.is_deadlock(raised.value)
    assert calls == [1], "the caller's rolled-back writes cannot be redone by a retry"


def test_other_errors_are_not_retried() -> None:
    calls: list[int] = []

    @deadlocks.retry_deadlocks
    def broken() -> None:
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM leasejobs_no_such_table")

    with pytest.raises(DatabaseError) as raised:
        broken()
    assert not deadlocks.is_deadlock(raised.value)
    assert calls == [1]


def test_with_autocommit_off_the_deadlock_is_passed_on() -> None:
    """set_autocommit(False) is the caller's own transaction, like atomic(): no retry."""
    write, calls, _second = _write_that_loses_a_deadlock()
    transaction.set_autocommit(False)
    try:
        with pytest.raises(OperationalError) as raised:
            write()
    finally:
        transaction.rollback()
        transaction.set_autocommit(True)
    write.rival.join(30)  # type: ignore[attr-defined]
    assert deadlocks.is_deadlock(raised.value)
    assert calls == [1]


def test_psycopg2_names_the_sqlstate_pgcode() -> None:
    class Psycopg2Error(Exception):
        pgcode = "40P01"

    class OtherError(Exception):
        pgcode = "55P03"  # lock_not_available

    assert deadlocks.is_deadlock(OperationalError("deadlock")) is False
    wrapped = OperationalError("deadlock detected")
    wrapped.__cause__ = Psycopg2Error("deadlock detected")
    assert deadlocks.is_deadlock(wrapped)
    other = OperationalError("lock timeout")
    other.__cause__ = OtherError("could not obtain lock")
    assert not deadlocks.is_deadlock(other)


@pytest.mark.parametrize(
    "write",
    [
        protocol.complete,
        protocol.release,
        protocol.request_cancel,
        protocol.cancel_attempt,
    ],
    ids=lambda write: write.__name__,
)
def test_the_protocols_own_transactions_are_retried_when_they_lose_a_deadlock(
    write: Callable[..., object],
) -> None:
    # complete_many and recover_expired retry each of their writes inside. request_cancel was
    # missing: racing a lease recovery on MariaDB, an operator's cancel failed with error 1213
    # (tests/protocol/test_pitfalls.py races the two).
    assert getattr(write, "__wrapped__", None) is not None, write.__name__
