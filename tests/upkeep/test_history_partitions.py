"""PostgreSQL's history partitions: where a final state puts a row, a write racing that move,
partitions made ahead, retention dropping them whole, and ``movejobhistory`` for older rows."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.test import override_settings
from testapp import jobs

from django_leasejobs import dialects, protocol, upkeep
from django_leasejobs.core.conf import settings
from django_leasejobs.models import DeadLetter, Effect, Job, JobLog, Status
from django_leasejobs.protocol import Failure, Outcome

from ..conftest import shifted

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgresql_only() -> Iterator[None]:
    """PostgreSQL only; each test starts and ends with the migration's layout (no range
    partition): DDL outlives the table flush between tests, and workers of earlier tests
    (acceptance ones, with retention settings) make partitions too."""
    if connection.vendor != "postgresql":
        pytest.skip("history partitions are PostgreSQL's")
    _drop_range_partitions()
    yield
    _drop_range_partitions()


def _drop_range_partitions() -> None:
    with connection.cursor() as cursor:
        for name in sorted(_partition_names()):
            cursor.execute(f'DROP TABLE "{name}"')  # a name of the library's own


def _partition_names() -> set[str]:
    return {
        partition.name
        for state in ("succeeded", "dead", "cancelled")
        for partition in dialects.history_partitions("default", state)
    }


def place(job_id: int) -> str:
    """The partition a job's row is in."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM django_leasejobs_job WHERE id = %s", [job_id]
        )
        return str(cursor.fetchone()[0])


def running(job: Job) -> Job:
    (claimed,) = protocol.claim("w1", batch=1)
    assert claimed.pk == job.pk
    return claimed


AGES = {"succeeded": "4d", "dead": "4d", "cancelled": "4d"}
"""Retention ages whose partitions are a day wide (a quarter of the age)."""


@override_settings(LEASEJOBS_RETENTION=AGES)
def test_each_final_state_moves_the_row_to_its_partition_of_the_day() -> None:
    assert len(dialects.make_partitions("default")) >= 3
    done, failing, cancelled = jobs.noop.enqueue(), jobs.noop.enqueue(), jobs.noop.enqueue()
    assert place(done.pk) == "django_leasejobs_job_live"
    assert protocol.complete(done.pk, running(done).attempt) is Outcome.SUCCEEDED
    protocol.request_cancel(cancelled.pk)
    claimed = running(failing)
    protocol.fail(claimed.pk, claimed.attempt, Failure("boom"), retryable=False)
    today = Job.objects.get(pk=done.pk).finished_at
    assert place(done.pk) == f"django_leasejobs_job_succeeded_{today:%Y%m%d}_0000"
    assert place(failing.pk).startswith("django_leasejobs_job_dead_2")
    assert place(cancelled.pk).startswith("django_leasejobs_job_cancelled_2")
    # Every read goes on through the table's name: the row, its dead letter, the states.
    assert Job.objects.get(pk=failing.pk).dead_letter.reason
    assert set(Job.objects.values_list("status", flat=True)) == {"succeeded", "dead", "cancelled"}
    assert not Job.objects.filter(in_history=False).exists()


def _waiting_for_a_lock(pid: int) -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
        return bool(row) and row[0] == "Lock"


def test_a_heartbeat_waiting_for_a_row_that_moved_finds_it_finished() -> None:
    """The completion moves the row while the heartbeat waits for its lock: PostgreSQL refuses
    the heartbeat's UPDATE (SQLSTATE 40001), and it is run again: the job is reported lost,
    no error reaches the worker."""
    job = jobs.noop.enqueue()
    claimed = running(job)
    moved, release = threading.Event(), threading.Event()
    heartbeat: dict[str, object] = {}

    def complete_and_hold() -> None:
        with transaction.atomic():
            Job.objects.filter(pk=job.pk).update(
                status=Status.SUCCEEDED, in_history=True, finished_at=shifted(0)
            )
            moved.set()
            release.wait(10)
        connections.close_all()

    def beat() -> None:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            heartbeat["pid"] = cursor.fetchone()[0]
        try:
            heartbeat["renewal"] = protocol.renew("w1", [(job.pk, claimed.attempt)])
        except Exception as exc:
            heartbeat["error"] = exc
        connections.close_all()

    holder = threading.Thread(target=complete_and_hold)
    holder.start()
    assert moved.wait(10)
    beating = threading.Thread(target=beat)
    beating.start()
    for _ in range(500):
        if "pid" in heartbeat and _waiting_for_a_lock(int(heartbeat["pid"])):  # type: ignore[call-overload]
            break
        threading.Event().wait(0.01)
    else:
        pytest.fail("the heartbeat never waited for the row")
    release.set()
    holder.join(10)
    beating.join(10)
    assert "error" not in heartbeat, heartbeat.get("error")
    assert heartbeat["renewal"].lost == {job.pk}  # type: ignore[attr-defined]


def _finished_days_ago(count: int, days: int, state: str = Status.SUCCEEDED) -> list[int]:
    """``count`` jobs of ``state`` that finished ``days`` ago, in the history."""
    made = [jobs.noop.enqueue() for _ in range(count)]
    ids = [job.pk for job in made]
    Job.objects.filter(pk__in=ids).update(
        status=state, in_history=True, finished_at=shifted(-days * 86400)
    )
    return ids


@override_settings(LEASEJOBS_RETENTION={"succeeded": "7d"})
def test_retention_drops_old_partitions_whole_and_keeps_what_pruning_keeps() -> None:
    dialects.make_partitions_since("default", _now_minus(10))
    old = _finished_days_ago(3, days=10)
    recent = _finished_days_ago(2, days=1)
    # A replay's job is kept while its dead letter exists (pruning's rule).
    (dead,) = _finished_days_ago(1, days=10, state=Status.DEAD)
    letter = DeadLetter.objects.create(
        job_id=dead, name="testapp.jobs.noop", queue="default", reason="r"
    )
    DeadLetter.objects.filter(pk=letter.pk).update(replayed_job_id=old[0])
    JobLog.objects.create(job_id=old[1], attempt=1, records=[])
    effect = Effect.objects.create(key="receipt-1", job_id=old[2])
    partitions = dialects.history_partitions("default", "succeeded")
    before = len(partitions)
    assert {place(pk) for pk in old} <= {partition.name for partition in partitions}

    dropped = upkeep.drop_expired("succeeded", dt.timedelta(days=7))

    assert dropped >= 1
    assert len(dialects.history_partitions("default", "succeeded")) == before - dropped
    assert set(Job.objects.filter(pk__in=old + recent).values_list("pk", flat=True)) == {
        old[0],
        *recent,
    }
    assert place(old[0]) == "django_leasejobs_job_succeeded_default"
    assert not JobLog.objects.filter(job_id=old[1]).exists()
    assert Effect.objects.get(pk=effect.pk).job_id is None  # the key outlives its job
    # The walk that follows deletes nothing inside a partition that remains.
    bound = upkeep.walk_bound("succeeded")
    assert bound is not None
    assert all(
        f < bound for f in Job.objects.filter(pk=old[0]).values_list("finished_at", flat=True)
    )


def _now_minus(days: int) -> dt.datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT STATEMENT_TIMESTAMP() - make_interval(days => %s)", [days])
        return cursor.fetchone()[0]  # type: ignore[no-any-return]


def test_workers_make_partitions_ahead_once_per_lease() -> None:
    with override_settings(LEASEJOBS_HISTORY_PARTITION="3d", LEASEJOBS_RETENTION=AGES):
        maker = upkeep.Partitions("w1", clock=lambda: 1000.0)
        made = maker.tick()
        assert len(made) == 3 * 2  # the current span and the next, of each state
        assert maker.tick() == []  # not before MAKE_EVERY
        latest = dialects.history_partitions("default", "succeeded")[-1]
        assert latest.upper - latest.lower == dt.timedelta(days=3)
        assert latest.upper >= _now_minus(0) + dt.timedelta(days=3)
        # Another worker does not make them meanwhile: the lease is held.
        assert upkeep.Partitions("w2", clock=lambda: 1000.0).tick() == []


@override_settings(LEASEJOBS_RETENTION={"succeeded": "8d", "dead": "30d"})
def test_each_state_gets_a_quarter_of_its_age_and_a_state_kept_for_ever_none() -> None:
    assert dialects.history_spans() == {
        "succeeded": dt.timedelta(days=2),
        "dead": dt.timedelta(days=7, hours=12),
    }
    made = dialects.make_partitions("default")
    assert {name.split("_job_")[1].split("_")[0] for name in made} == {"succeeded", "dead"}
    assert dialects.history_partitions("default", "cancelled") == []
    (cancelled,) = [jobs.noop.enqueue()]
    protocol.request_cancel(cancelled.pk)
    assert place(cancelled.pk) == "django_leasejobs_job_cancelled_default"


@override_settings(LEASEJOBS_RETENTION={"succeeded": "1m"})
def test_a_short_age_gets_partitions_of_a_minute() -> None:
    assert dialects.history_spans() == {"succeeded": dt.timedelta(minutes=1)}


@pytest.mark.parametrize("value", ["30s", "90s", "0m", "soon", 5])
def test_a_partition_span_that_is_not_whole_minutes_is_refused(value: object) -> None:
    with (
        override_settings(LEASEJOBS_HISTORY_PARTITION=value),
        pytest.raises(ImproperlyConfigured, match="LEASEJOBS_HISTORY_PARTITION"),
    ):
        settings.HISTORY_PARTITION  # noqa: B018


@override_settings(LEASEJOBS_RETENTION={"succeeded": "60d"})
def test_movejobhistory_moves_rows_finished_before_the_partitions_in_batches() -> None:
    before = [jobs.noop.enqueue() for _ in range(5)]
    ids = [job.pk for job in before]
    # Rows as the table held them before 0026: finished, still in the live partition.
    Job.objects.filter(pk__in=ids).update(status=Status.SUCCEEDED, finished_at=shifted(-30 * 86400))
    assert {place(pk) for pk in ids} == {"django_leasejobs_job_live"}
    out = StringIO()
    call_command("movejobhistory", batch=2, stdout=out)
    assert "Moved 5 finished job(s) into the history partitions in 3 batch(es)." in out.getvalue()
    assert "history partition(s) for the older jobs" in out.getvalue()
    assert all(place(pk).startswith("django_leasejobs_job_succeeded_2") for pk in ids)
    again = StringIO()
    call_command("movejobhistory", stdout=again)
    assert "Moved 0 finished job(s)" in again.getvalue()


@pytest.mark.parametrize(("option", "value"), [("batch", 0), ("pause", -1.0)])
def test_movejobhistory_refuses_bad_options(option: str, value: object) -> None:
    with pytest.raises(CommandError, match=option):
        call_command("movejobhistory", **{option: value})
