"""The watchdog thread: ends attempts whose handler ran past its timeout or was cancelled.

A Python thread cannot be stopped from outside, so the worker does what it can do: it sets the
handler's ``ctx.cancelled`` and writes the attempt's end itself, fenced by the attempt token
(``attempt_ends.end_attempt``); an ``async def`` handler's task is also cancelled. The handler's
own result is refused when it returns, and its thread keeps its slot (it still runs) until
then. A handler still running one heartbeat interval after its attempt ended is **stuck**:
logged, counted, and with ``max_stuck`` the worker stops so that its supervisor starts a fresh
process.

The runners call in twice per job: :meth:`Watchdog.on_start` when the handler starts (its
deadline), :meth:`Watchdog.ended_returned` when they are done with the slot (was its attempt
ended meanwhile?). Every move of a slot goes through its transition methods (:mod:`.slots`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from django.db import Error as DatabaseError
from django.db import connections

from . import attempt_ends, execution, threads
from .connection_keeper import ConnectionKeeper
from .context import CANCELLED, TIMEOUT
from .ledger import Ledger
from .options import WorkerOptions
from .outage import RECONNECT, headline
from .slots import ENDED_STATES, InFlight, Slot, SlotState

logger = logging.getLogger("django_leasejobs")

TICK = 0.25
"""Longest wait between two checks: a timeout fires at most this late."""


class Watchdog:
    """The watchdog thread and the cancel requests waiting for it."""

    def __init__(
        self,
        *,
        options: WorkerOptions,
        slots: InFlight,
        ledger: Ledger,
        keeper: ConnectionKeeper,
        stop: Callable[[str], None],
        cancel_async: Callable[[Slot], bool],
    ) -> None:
        self.worker_id = options.worker_id
        self.options = options
        """``heartbeat``: a handler still running this long after its attempt ended is stuck;
        ``max_stuck``: how many stuck handlers stop the worker."""
        self.slots = slots
        self.ledger = ledger
        self.keeper = keeper
        self.stop_worker = stop
        """``Control.stop``: called at ``max_stuck``."""
        self.cancel_async = cancel_async
        """The async pool's cancel: an async handler's task can be cancelled."""
        self._wake = threading.Event()
        """Wakes the watchdog at once: set by a runner (a handler with an early deadline
        started) and by :meth:`request_cancel`; cleared by the watchdog."""
        self._stop = threading.Event()
        self._next = 0.0
        """``time.monotonic()`` of the next pass: written by the watchdog thread, read by the
        runners without a lock (a stale read wakes it once more, or a tick later)."""
        self._thread: threading.Thread | None = None
        self._requests: set[int] = set()
        """Job ids an operator asked to cancel: added by the heartbeat and the LISTEN thread,
        taken by the watchdog, under ``_requests_lock``."""
        self._requests_lock = threading.Lock()
        self.stuck_limit_reached = False
        """``max_stuck`` stuck threads were reached and the worker stopped for it (written by
        the watchdog, read once the run ended)."""

    def start(self) -> None:
        self._thread = threads.start(self._loop, name="leasejobs-watchdog")

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=max(TICK * 4, 1.0))

    def request_cancel(self, job_ids: set[int]) -> None:
        """Hand cancel requests to the watchdog (from the heartbeat or the LISTEN thread)."""
        if job_ids:
            with self._requests_lock:
                self._requests |= job_ids
            self._wake.set()

    def _handler_started(
        self, slot: Slot, started: execution.Execution, timeout: float | None
    ) -> None:
        """``Execution.on_start``, in the runner: the deadline counts from here."""
        slot.handled = started
        slot.timeout = timeout
        slot.handler_started = time.monotonic()
        if timeout is not None:
            slot.deadline = slot.handler_started + timeout
            if slot.deadline < self._next:  # rare: most timeouts outlast a tick
                self._wake.set()

    def on_start(self, slot: Slot) -> Callable[[execution.Execution, float | None], None]:
        return functools.partial(self._handler_started, slot)

    def _loop(self) -> None:
        self.keeper.adopt()
        errors = 0
        wait = TICK
        try:
            while not self._stop.is_set():
                self._next = time.monotonic() + wait
                self._wake.wait(wait)
                self._wake.clear()
                self.keeper.close_if_idle()
                wait = TICK
                try:
                    wait = self.watch_once()
                    errors = 0
                except DatabaseError as exc:
                    errors += 1
                    logger.warning(
                        "worker.database_error id=%s where=watchdog errors=%s error=%s",
                        self.worker_id,
                        errors,
                        headline(exc),
                    )
                    execution.close_old_connections()
                    self._stop.wait(RECONNECT.ceiling(errors))
                except Exception:  # never lose the watchdog
                    logger.exception("worker.watchdog_error id=%s", self.worker_id)
        finally:
            connections.close_all()

    def watch_once(self) -> float:
        """One pass: act on cancel requests and deadlines, retry unwritten ends, spot stuck.

        Returns how long to wait before the next pass: until the nearest deadline, at most
        ``TICK``.
        """
        with self._requests_lock:
            requested, self._requests = self._requests, set()
        live, ended = self.slots.snapshot()
        now = time.monotonic()
        wait = TICK
        for slot in live:
            if slot.job.pk in requested:
                self._end(slot, CANCELLED)
            elif slot.deadline is not None and now >= slot.deadline:
                self._end(slot, TIMEOUT)
            elif slot.deadline is not None:
                wait = min(wait, slot.deadline - now)
        for slot in ended:
            assert slot.ended_at is not None
            state = slot.state
            if state is SlotState.ENDED or state is SlotState.ENDED_RETURNED:
                self._write_end(slot)  # not written yet (a failed write is tried again)
            elif state is SlotState.END_WRITTEN and now >= slot.ended_at + self.options.heartbeat:
                self._mark_stuck(slot, now)
        return max(wait, 0.0)

    def _end(self, slot: Slot, reason: str) -> None:
        """Take the attempt from its handler (unless its result is being written) and end it."""
        if self.slots.end(slot, reason) is None:  # its thread stays taken; its job id is free
            return
        slot.cancellation.set(reason)
        if slot.is_async:
            self.cancel_async(slot)  # an async handler can be stopped: its task is cancelled
        if reason == TIMEOUT:  # its line is the protocol's, with the outcome (job.timeout)
            self.ledger.timed_out()
        self._write_end(slot)

    def _write_end(self, slot: Slot) -> None:
        """The fenced write; a database error leaves it to the next pass."""
        execution.close_old_connections()
        outcome = attempt_ends.end_attempt(
            slot.job, slot.end_reason, execution=slot.handled, timeout=slot.timeout
        )
        self.ledger.count(slot, outcome)
        self.slots.end_written(slot)  # settled if the handler returned while it waited

    def _mark_stuck(self, slot: Slot, now: float) -> None:
        assert slot.ended_at is not None
        if slot.try_stick() is None:  # its handler returned meanwhile
            return
        stuck_now = self.ledger.stuck(slot.token)
        logger.warning(
            "worker.stuck id=%s job=%s name=%s attempt=%s reason=%s seconds_since_end=%.1f "
            "stuck=%s max_stuck=%s",
            self.worker_id,
            slot.job.pk,
            slot.job.name,
            slot.job.attempt,
            slot.end_reason,
            now - slot.ended_at,
            stuck_now,
            self.options.max_stuck,
        )
        if self.options.max_stuck is not None and stuck_now >= self.options.max_stuck:
            self.stuck_limit_reached = True
            self.stop_worker(f"max_stuck={self.options.max_stuck} reached")

    def ended_returned(self, slot: Slot) -> bool:
        """A runner is done with its slot (its handler returned, its result written or
        grouped, or it never ran): the slot settles, unless a grouped completion or the
        watchdog's unwritten end still needs it. True if the worker had ended the attempt."""
        move = self.slots.returned(slot)
        if move is None or move.before not in ENDED_STATES:
            return False
        if move.before is SlotState.STUCK:
            self._thread_returned(slot)
        return True

    @staticmethod
    def refuse_late(slot: Slot) -> None:
        """The handler of an attempt the worker ended has returned: nothing of it is written.

        Not a stale write: the attempt's end (``job.cancelled``, ``job.timeout``) is logged
        already, and a handler that saw ``ctx.cancelled`` and returned did what it should.
        """
        logger.debug(
            "job.returned id=%s attempt=%s (attempt ended: %s; its result is not written)",
            slot.job.pk,
            slot.job.attempt,
            slot.end_reason,
        )

    def _thread_returned(self, slot: Slot) -> None:
        """A stuck handler returned at last: its thread is free again."""
        stuck_now = self.ledger.unstuck(slot.token)
        logger.info(
            "worker.unstuck id=%s job=%s attempt=%s stuck=%s",
            self.worker_id,
            slot.job.pk,
            slot.job.attempt,
            stuck_now,
        )
