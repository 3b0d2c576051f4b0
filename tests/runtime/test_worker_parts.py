"""The worker's parts, each built alone from what it takes by constructor (no ``Worker``, no
threads started): options, slots, ledger, control, completer, claim room, watchdog, heartbeat,
writer. The database ones run against the real test database."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable

import pytest
from django.db import connection
from django.db.models import F
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db.dbtime import DbNow
from django_leasejobs.models import Job, JobLog, Status
from django_leasejobs.models import Worker as WorkerRow
from django_leasejobs.protocol import Outcome
from django_leasejobs.reports.summary import TABLE_ROWS, Summary
from django_leasejobs.runtime import execution
from django_leasejobs.runtime.claim_sizing import ClaimRoom, ClaimSizer
from django_leasejobs.runtime.completions import Completer
from django_leasejobs.runtime.connection_keeper import ConnectionKeeper
from django_leasejobs.runtime.control import Control
from django_leasejobs.runtime.heartbeat import Heartbeat
from django_leasejobs.runtime.ledger import Ledger
from django_leasejobs.runtime.options import DEFAULT_BATCH, WorkerOptions
from django_leasejobs.runtime.result_writing import ResultWriter
from django_leasejobs.runtime.slots import InFlight, Lane, Slot, SlotState
from django_leasejobs.runtime.watchdog import Watchdog

from ..conftest import fields

WORKER = "parts-w"


def build_options(**given: object) -> WorkerOptions:
    given = {"worker_id": WORKER, "lease": 30, "heartbeat": 5, "poll": 1, **given}
    return WorkerOptions.build(**given)  # type: ignore[arg-type]


def a_job(pk: int = 1, attempt: int = 1) -> Job:
    """An unsaved job, for the parts that only hold slots."""
    return Job(pk=pk, attempt=attempt, name="testapp.jobs.noop", queue="default")


def statements(complete: Callable[[], object]) -> list[tuple[str, bool]]:
    """Each statement ``complete`` sends: its verb, and whether it ran in a transaction block."""
    seen: list[tuple[str, bool]] = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        seen.append((sql.split()[0].upper(), connection.in_atomic_block))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        complete()
    return seen


class Parts:
    """The shared objects a worker wires together, built here the same way."""

    def __init__(
        self, lanes: list[Lane] | None = None, async_slots: int = 0, max_stuck: int = 1
    ) -> None:
        self.slots = InFlight()
        self.ledger = Ledger(WORKER, 30.0, 5.0, None)
        self.control = Control(WORKER, 1.0, self.slots)
        self.completer = Completer(WORKER, self.slots, self.ledger)
        self.lanes = lanes or [Lane(None, 2, ClaimSizer(2, 10))]
        self.room = ClaimRoom(self.lanes, self.slots, self.completer, async_slots)
        self.cancelled: list[Slot] = []
        self.watchdog = Watchdog(
            options=build_options(max_stuck=max_stuck),
            slots=self.slots,
            ledger=self.ledger,
            keeper=ConnectionKeeper(),
            stop=self.control.stop,
            cancel_async=lambda slot: self.cancelled.append(slot) is None,
        )
        self.writer = ResultWriter(
            worker_id=WORKER,
            slots=self.slots,
            completer=self.completer,
            ledger=self.ledger,
            watchdog=self.watchdog,
            abandon=self.control.abandon,
        )

    def claim(self, batch: int = 10) -> list[Slot]:
        claimed = protocol.claim(WORKER, batch=batch, lease_seconds=30)
        slots = [Slot(job, self.lanes[0]) for job in claimed]
        for slot in slots:
            self.slots.add(slot)
        return slots

    def heartbeat(self) -> Heartbeat:
        """The heartbeat of a worker of two threads, over these slots."""
        return Heartbeat(
            options=build_options(concurrency=2),
            slots=self.slots,
            ledger=self.ledger,
            keeper=ConnectionKeeper(),
            request_cancel=self.watchdog.request_cancel,
        )

    def run(self, slot: Slot) -> execution.Execution:
        """What a pool thread does, on this thread."""
        assert slot.try_start() is not None
        return execution.execute(
            slot.job, WORKER, slot.lease_lost, on_start=self.watchdog.on_start(slot)
        )


class TestOptions:
    def test_defaults_are_filled_in_and_the_options_cannot_change(self) -> None:
        options = build_options(concurrency=3)
        assert (options.concurrency, options.lease, options.heartbeat, options.poll) == (
            3,
            30.0,
            5.0,
            1.0,
        )
        assert options.batch == max(3 + options.async_slots, DEFAULT_BATCH)
        with pytest.raises(dataclasses.FrozenInstanceError):
            options.batch = 1  # type: ignore[misc]

    def test_budgets_give_the_queues_and_the_total_of_the_threads(self) -> None:
        options = build_options(queues={"mail": 3, "reports": 2})
        assert (options.queues, options.concurrency) == (["mail", "reports"], 5)
        assert options.queues_text == "mail:3,reports:2"

    @pytest.mark.parametrize(
        ("given", "message"),
        [
            ({"concurrency": 0}, "concurrency must be a positive integer"),
            ({"queues": "default"}, "not a string"),
            ({"queues": {"mail": 1}, "concurrency": 2}, "not both"),
            ({"grace": -1}, "grace must be"),
            ({"worker_id": " "}, "worker_id must be"),
        ],
    )
    def test_a_bad_option_is_refused_by_name(self, given: dict, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            build_options(**given)

    def test_a_heartbeat_as_long_as_the_lease_is_refused(self) -> None:
        with pytest.raises(ValueError, match="must be shorter than the lease"):
            WorkerOptions.build(lease=5, heartbeat=5)


class TestInFlight:
    def test_an_ended_slot_keeps_its_thread_but_frees_its_job_id(self) -> None:
        slots = InFlight()
        first, second = Slot(a_job(1)), Slot(a_job(2))
        slots.add(first)
        slots.add(second)
        assert (slots.running, slots.total, slots.get(1)) == (2, 2, first)
        assert slots.end(first, "timeout") is not None
        assert (slots.running, slots.total, slots.any_ended, slots.get(1)) == (1, 2, True, None)
        rerun = Slot(a_job(1, attempt=2))  # the same job, claimed again under a newer attempt
        slots.add(rerun)
        slots.end_written(first)
        slots.returned(first)  # written and returned: it settles
        assert (slots.running, slots.total, slots.get(1)) == (2, 2, rerun)
        slots.returned(rerun)
        slots.returned(second)
        assert (slots.running, slots.total, slots.any_ended) == (0, 0, False)

    def test_the_heartbeat_renews_only_slots_nobody_is_reporting_releasing_or_ended(self) -> None:
        slots = InFlight()
        plain, reporting, released, ended = (Slot(a_job(pk)) for pk in (1, 2, 3, 4))
        assert reporting.try_start()
        assert reporting.try_write()
        assert released.try_release()
        assert ended.try_end("timeout")
        for slot in (plain, reporting, released, ended):
            slots.add(slot)
        assert slots.renewable() == [plain]

    def test_a_lane_holds_its_own_slots_live_or_ended(self) -> None:
        mail, other = (Lane([name], 1, ClaimSizer(1, 10)) for name in ("mail", "other"))
        slots = InFlight()
        for pk, lane in ((1, mail), (2, mail), (3, other)):
            slots.add(Slot(a_job(pk), lane))
        slots.end(slots.get(2), "timeout")  # type: ignore[arg-type]
        assert (slots.held_by(mail), slots.held_by(other)) == (2, 1)


class TestLedgerAndControl:
    def test_outcomes_and_stuck_handlers_are_counted(self) -> None:
        ledger = Ledger(WORKER, 30.0, 5.0, None)
        ledger.claimed()
        ledger.count(Slot(a_job(1)), Outcome.SUCCEEDED)
        ledger.count(Slot(a_job(2)), Outcome.STALE)
        assert (ledger.summary.claimed, ledger.summary.succeeded, ledger.summary.stale) == (1, 1, 1)
        assert (ledger.stuck((1, 1)), ledger.stuck((2, 1)), ledger.unstuck((1, 1))) == (1, 2, 1)
        assert (ledger.stuck_now, ledger.summary.stuck) == (1, 2)
        (counts,) = ledger.runtimes.take().values()
        assert counts.stale == 1

    def test_each_outcome_has_its_own_counter_and_table_row(self) -> None:
        summary = Summary(WORKER)
        for times, outcome in enumerate(Outcome, start=1):
            for _ in range(times):
                summary.count(outcome)
        counted = {outcome.value: getattr(summary, outcome.value) for outcome in Outcome}
        assert counted == {outcome.value: n for n, outcome in enumerate(Outcome, start=1)}
        assert summary.reported == sum(range(1, len(Outcome) + 1))
        rows = summary.as_table().splitlines()[1 : len(Outcome) + 2]
        assert [row.split() for row in rows] == [
            *([name, str(counted[name])] for name in TABLE_ROWS),
            ["total", str(summary.reported)],
        ]
        assert sorted(TABLE_ROWS) == sorted(counted)

    def test_the_first_stop_gives_the_reason_and_a_later_one_the_grace(self) -> None:
        control = Control(WORKER, 30.0, InFlight())
        control.stop("first")
        control.stop("second", grace=0)
        assert (control.reason, control.grace) == ("first", 0.0)
        assert control.stopping.is_set()
        assert control.wake.is_set()
        assert control.stop_at is not None


class TestClaimRoom:
    def test_successes_waiting_for_the_flush_do_not_hold_a_thread(self) -> None:
        parts = Parts()
        slots = [Slot(a_job(pk), parts.lanes[0]) for pk in (1, 2)]
        for slot in slots:
            parts.slots.add(slot)
        assert (parts.room.held(), parts.room.wanted()) == (2, 0)
        parts.completer.add(slots[:1])
        assert (parts.room.held(), parts.room.wanted()) == (1, 1)

    def test_async_slots_open_after_an_async_claim_and_an_ended_handler_closes_the_extra(
        self,
    ) -> None:
        parts = Parts(async_slots=5)
        assert parts.room.wanted() == 3  # two threads and one job more, to find async work
        parts.room.async_recent = True
        assert parts.room.wanted() == 7
        parts.room.async_recent = False
        stuck = Slot(a_job(1), parts.lanes[0])
        parts.slots.add(stuck)
        parts.slots.end(stuck, "timeout")
        assert parts.room.wanted() == 1  # its thread is taken, and no job more waits behind it


@pytest.mark.django_db(transaction=True)
class TestWithTheDatabase:
    def test_the_completer_writes_every_waiting_success_in_one_flush(self) -> None:
        jobs.noop.enqueue_many([((), {})] * 3)
        parts = Parts()
        slots = parts.claim()
        for slot in slots:
            assert parts.writer.finished(slot, parts.run(slot)) is True  # grouped, not written
        assert (parts.completer.waiting(), parts.slots.running) == (3, 3)
        assert Job.objects.filter(status=Status.RUNNING).count() == 3
        parts.completer.flush()
        assert Job.objects.filter(status=Status.SUCCEEDED).count() == 3
        assert (parts.completer.waiting(), parts.slots.running) == (0, 0)
        assert parts.ledger.summary.succeeded == 3

    def test_a_flush_of_jobs_that_logged_nothing_sends_only_the_completion(self) -> None:
        """No transaction of its own around the batch's completion (two round trips more, and
        a savepoint on some databases): it sends what ``protocol.complete_many`` sends alone."""
        jobs.noop.enqueue_many([((), {})] * 6)
        parts = Parts()
        first, second = parts.claim(batch=3), parts.claim(batch=3)
        for slot in first:
            parts.writer.finished(slot, parts.run(slot))
        flushed = statements(parts.completer.flush)
        alone = statements(
            lambda: protocol.complete_many([s.token for s in second], finished_by=WORKER)
        )
        assert Job.objects.filter(status=Status.SUCCEEDED).count() == 6
        assert flushed == alone

    def test_a_flush_of_first_attempts_that_logged_writes_the_logs_with_the_completion(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """On PostgreSQL in the completion's one statement, in autocommit (no transaction,
        savepoint and insert of their own); elsewhere in the completion's transaction."""
        caplog.set_level(logging.INFO, logger="testapp")
        jobs.logs_lines.enqueue_many([((2,), {})] * 3)
        parts = Parts()
        for slot in parts.claim(batch=3):
            parts.writer.finished(slot, parts.run(slot))
        flushed = statements(parts.completer.flush)
        assert Job.objects.filter(status=Status.SUCCEEDED).count() == 3
        assert sorted(JobLog.objects.values_list("attempt", flat=True)) == [1, 1, 1]
        if connection.vendor == "postgresql":
            assert flushed == [("WITH", False)]
        else:
            assert ("INSERT", True) in flushed
            # SQLite's BEGIN is sent as the block opens.
            assert all(inside for verb, inside in flushed if verb != "BEGIN"), flushed

    def test_the_watchdog_ends_an_attempt_past_its_deadline_and_refuses_its_result(self) -> None:
        job = jobs.noop.enqueue()
        parts = Parts()
        (slot,) = parts.claim()
        result = parts.run(slot)
        slot.deadline = time.monotonic() - 1  # as if the handler had run past its timeout
        slot.timeout = 0.5
        parts.watchdog.watch_once()
        assert fields(job.pk, "status")["status"] != Status.RUNNING
        assert (parts.ledger.summary.timed_out, parts.slots.running, parts.slots.total) == (
            1,
            0,
            1,
        )
        assert slot.cancellation.reason == "timeout"
        assert parts.writer.finished(slot, result) is False  # its token is spent
        assert parts.watchdog.ended_returned(slot) is True
        assert parts.slots.total == 0

    def test_a_cancel_request_ends_the_attempt_and_cancels_an_async_task(self) -> None:
        job = jobs.noop.enqueue()
        parts = Parts()
        (slot,) = parts.claim()
        slot.is_async = True
        protocol.request_cancel(job.pk)
        parts.watchdog.request_cancel({job.pk})
        parts.watchdog.watch_once()
        assert fields(job.pk, "status")["status"] == Status.CANCELLED
        assert (parts.cancelled, parts.ledger.summary.cancelled) == ([slot], 1)

    def test_a_handler_stuck_past_a_heartbeat_stops_the_worker_at_max_stuck(self) -> None:
        jobs.noop.enqueue()
        parts = Parts()
        (slot,) = parts.claim()
        slot.deadline = time.monotonic() - 1
        parts.watchdog.watch_once()
        slot.ended_at = time.monotonic() - 6  # a heartbeat (5 s) ago
        parts.watchdog.watch_once()
        assert (slot.state, parts.ledger.stuck_now) == (SlotState.STUCK, 1)
        assert parts.watchdog.stuck_limit_reached
        assert parts.control.reason == "max_stuck=1 reached"

    def test_max_stuck_counts_threads_two_hung_attempts_of_one_job_are_two(self) -> None:
        job = jobs.noop.enqueue()
        parts = Parts(max_stuck=2)
        hung = []
        for _ in range(2):  # attempt 1 times out, its retry comes back here and hangs too
            Job.objects.filter(pk=job.pk).update(run_at=DbNow())
            (slot,) = parts.claim()
            slot.deadline = time.monotonic() - 1
            parts.watchdog.watch_once()
            hung.append(slot)
        assert [slot.job.attempt for slot in hung] == [1, 2]
        for slot in hung:
            slot.ended_at = time.monotonic() - 6  # a heartbeat (5 s) ago
        parts.watchdog.watch_once()
        assert parts.ledger.stuck_now == 2
        assert parts.control.reason == "max_stuck=2 reached"
        parts.watchdog.ended_returned(hung[0])  # one thread returns at last
        assert parts.ledger.stuck_now == 1

    def test_a_handler_returning_as_the_watchdog_marks_it_stuck_is_not_counted_stuck(
        self,
    ) -> None:
        """The watchdog read its ended slots, then the handler returned and the slot settled,
        then the watchdog came to it: a thread that is free is not counted stuck (the count
        would never drop again, and ``max_stuck`` could stop a healthy worker)."""
        jobs.noop.enqueue()
        parts = Parts()
        (slot,) = parts.claim()
        slot.deadline = time.monotonic() - 1
        parts.watchdog.watch_once()  # ended, and the end written
        slot.ended_at = time.monotonic() - 6  # a heartbeat (5 s) ago
        assert parts.watchdog.ended_returned(slot) is True  # the handler returns: settled
        parts.watchdog._mark_stuck(slot, time.monotonic())  # the pass that read it before
        assert (parts.ledger.stuck_now, parts.watchdog.stuck_limit_reached) == (0, False)
        assert parts.slots.total == 0

    def test_a_beat_renews_the_leases_writes_the_row_and_marks_a_lost_lease(self) -> None:
        jobs.noop.enqueue_many([((), {})] * 2)
        parts = Parts()
        kept, lost = parts.claim()
        Job.objects.filter(pk=lost.job.pk).update(attempt=lost.job.attempt + 1)  # reclaimed
        earlier = F("lease_expires_at") - dt.timedelta(seconds=10)
        Job.objects.filter(pk=kept.job.pk).update(lease_expires_at=earlier)
        before = fields(kept.job.pk, "lease_expires_at")["lease_expires_at"]
        parts.heartbeat().beat()
        assert fields(kept.job.pk, "lease_expires_at")["lease_expires_at"] > before
        assert (kept.lease_lost.is_set(), lost.lease_lost.is_set()) == (False, True)
        row = WorkerRow.objects.get(worker_id=WORKER)
        assert (row.concurrency, row.running) == (2, 2)

    def test_a_failure_is_written_at_once_not_grouped(self) -> None:
        job = jobs.always_fails.enqueue()
        parts = Parts()
        (slot,) = parts.claim()
        assert parts.writer.finished(slot, parts.run(slot)) is False
        assert parts.completer.waiting() == 0
        assert fields(job.pk, "status", "attempt") == {"status": Status.FAILED, "attempt": 1}
        assert parts.ledger.summary.retried == 1

    def test_a_released_slot_is_never_reported(self) -> None:
        job = jobs.noop.enqueue()
        parts = Parts()
        (slot,) = parts.claim()
        result = parts.run(slot)
        assert slot.try_release()  # shutdown handed it back while the handler ran
        assert parts.writer.finished(slot, result) is False
        assert (parts.completer.waiting(), parts.ledger.summary.succeeded) == (0, 0)
        assert fields(job.pk, "status")["status"] == Status.RUNNING
