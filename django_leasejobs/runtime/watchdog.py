"""The watchdog thread: ends attempts whose handler ran past its timeout or was cancelled.

A Python thread cannot be stopped from outside, so the worker does what it can do: it sets the
handler's ``ctx.cancelled`` and writes the attempt's end itself, fenced by the attempt token
(``execution.end_attempt``); an ``async def`` handler's task is also cancelled. The handler's
own result is refused when it returns, and its thread keeps its slot (it still runs) until
then. A handler still running one heartbeat
interval after its attempt ended is **stuck**: logged, counted, and with ``max_stuck`` the
worker stops so that its supervisor starts a fresh process.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from django.db import Error as DatabaseError
from django.db import connections

from . import execution
from .context import CANCELLED, TIMEOUT
from .worker_state import RECONNECT, Slot, WorkerState, headline

logger = logging.getLogger("django_leasejobs")

TICK = 0.25
"""Longest wait between two checks: a timeout fires at most this late."""


class Watchdog(WorkerState):
    stop: Callable[..., None]  # Shutdown.stop, on the assembled Worker
    _cancel_async: Callable[[Slot], bool]  # AsyncRunner._cancel_async, likewise

    def _start_watchdog(self) -> None:
        self._watchdog_thread = threading.Thread(
            target=self._watch_loop, name="leasejobs-watchdog", daemon=True
        )
        self._watchdog_thread.start()

    def _stop_watchdog(self) -> None:
        self._watch_stop.set()
        self._watch_wake.set()
        if self._watchdog_thread is not None:
            self._watchdog_thread.join(timeout=max(TICK * 4, 1.0))

    def _handler_started(
        self, slot: Slot, started: execution.Execution, timeout: float | None
    ) -> None:
        """``Execution.on_start``, in the pool thread: the deadline counts from here."""
        slot.handled = started
        slot.timeout = timeout
        slot.handler_started = time.monotonic()
        if timeout is not None:
            slot.deadline = slot.handler_started + timeout
            if slot.deadline < self._watch_next:  # rare: most timeouts outlast a tick
                self._watch_wake.set()

    def _on_start(self, slot: Slot) -> Callable[[execution.Execution, float | None], None]:
        return functools.partial(self._handler_started, slot)

    def _watch_loop(self) -> None:
        self.connection_keeper.adopt()
        errors = 0
        wait = TICK
        try:
            while not self._watch_stop.is_set():
                self._watch_next = time.monotonic() + wait
                self._watch_wake.wait(wait)
                self._watch_wake.clear()
                self.connection_keeper.close_if_idle()
                wait = TICK
                try:
                    wait = self._watch_once()
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
                    self._watch_stop.wait(RECONNECT.ceiling(errors))
                except Exception:  # never lose the watchdog
                    logger.exception("worker.watchdog_error id=%s", self.worker_id)
        finally:
            connections.close_all()

    def _watch_once(self) -> float:
        """One pass: act on cancel requests and deadlines, retry unwritten ends, spot stuck.

        Returns how long to wait before the next pass: until the nearest deadline, at most
        ``TICK``.
        """
        with self._cancel_lock:
            requested, self._cancel_requests = self._cancel_requests, set()
        with self._in_flight_lock:
            live = list(self._in_flight.values())
            ended = list(self._ended.values())
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
            if not slot.end_written:
                self._write_end(slot)
            elif not slot.stuck and now >= slot.ended_at + self.heartbeat:
                self._mark_stuck(slot, now)
        return max(wait, 0.0)

    def _end(self, slot: Slot, reason: str) -> None:
        """Take the attempt from its handler (unless it is being reported) and end it."""
        with slot.lock:
            if slot.reporting or slot.released or slot.returned or slot.ended_at is not None:
                return
            slot.ended_at = time.monotonic()
            slot.end_reason = reason
            if slot.handler_started is not None:  # for the log line of the outcome
                slot.duration = slot.ended_at - slot.handler_started
        with self._in_flight_lock:  # its thread stays taken; the job id is free for a retry
            if self._in_flight.get(slot.job.pk) is slot:
                del self._in_flight[slot.job.pk]
                if slot.is_async:
                    self._async_in_flight -= 1
            self._ended[slot.token] = slot
        slot.cancellation.set(reason)
        if slot.is_async:
            self._cancel_async(slot)  # an async handler can be stopped: its task is cancelled
        if reason == TIMEOUT:  # its line is the protocol's, with the outcome (job.timeout)
            with self._summary_lock:
                self.summary.timed_out += 1
        self._write_end(slot)

    def _write_end(self, slot: Slot) -> None:
        """The fenced write; a database error leaves it to the next pass."""
        execution.close_old_connections()
        outcome = execution.end_attempt(
            slot.job, slot.end_reason, execution=slot.handled, timeout=slot.timeout
        )
        with slot.lock:
            slot.end_written = True
            returned = slot.returned
        self._count(slot, outcome)
        if returned:  # the handler returned while the write waited for the database
            with self._in_flight_lock:
                self._ended.pop(slot.token, None)

    def _mark_stuck(self, slot: Slot, now: float) -> None:
        assert slot.ended_at is not None
        slot.stuck = True
        with self._summary_lock:
            self.summary.stuck += 1
            self._stuck.add(slot.job.pk)
            stuck_now = len(self._stuck)
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
            self.max_stuck,
        )
        if self.max_stuck is not None and stuck_now >= self.max_stuck:
            self.stuck_limit_reached = True
            self.stop(f"max_stuck={self.max_stuck} reached")

    def _ended_returned(self, slot: Slot) -> bool:
        """A handler returned: True if the worker had ended its attempt (the slot is then
        settled here), False if the caller reports it as usual. From here the watchdog leaves
        the slot alone."""
        with slot.lock:
            slot.returned = True
            ended, written = slot.ended_at is not None, slot.end_written
        if not ended:
            return False
        if written:  # else the watchdog's write, when it lands, takes the slot out
            with self._in_flight_lock:
                self._ended.pop(slot.token, None)
        self._thread_returned(slot)
        return True

    def _refuse_late(self, slot: Slot) -> None:
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
        """A pool thread's handler returned at last: a stuck thread is free again."""
        if not slot.stuck:
            return
        with self._summary_lock:
            self._stuck.discard(slot.job.pk)
            stuck_now = len(self._stuck)
        logger.info(
            "worker.unstuck id=%s job=%s attempt=%s stuck=%s",
            self.worker_id,
            slot.job.pk,
            slot.job.attempt,
            stuck_now,
        )
