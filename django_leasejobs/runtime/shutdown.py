"""Shutdown: stop claiming, let in-flight jobs finish within ``grace``, release the rest.

A released job is claimable again at once by another worker, and the heartbeat thread, as it
stops, takes the worker's row out of the table of live workers. A second signal exits at once and
releases nothing: the leases expire and lease recovery takes the jobs again, as after a crash.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from django.db import Error as DatabaseError

from .. import protocol
from . import execution
from .completions import GroupedCompletions
from .wakeup import ListenerWakeup
from .watchdog import Watchdog
from .worker_state import Lane, Slot, headline

logger = logging.getLogger("django_leasejobs")

FORCED_EXIT_CODE = 1
"""Exit status after a second signal: nothing released, leases left to expire."""


class Shutdown(GroupedCompletions, ListenerWakeup, Watchdog):
    def stop(self, reason: str = "stop requested", *, grace: float | None = None) -> None:
        """Stop claiming; in-flight jobs get ``grace`` seconds, then the rest is released.

        ``grace`` overrides the worker's own for this stop: ``0`` releases every in-flight job
        at once (``runjobworker --reload`` does so when code changes).
        """
        if grace is not None:
            self.grace = float(grace)
        if not self._stopping.is_set():
            self._stop_reason = reason
            self._stop_at = time.monotonic()
            logger.info(
                "worker.stopping id=%s reason=%s in_flight=%s grace=%g",
                self.worker_id,
                reason,
                len(self._in_flight),
                self.grace,
            )
        self._stopping.set()
        self._wake.set()

    def install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM/SIGINT: the first stops gracefully, a second exits at once.

        After a forced exit nothing is released: the leases simply expire and lease recovery on
        another worker takes the jobs again (as after a crash). Returns a function that puts the
        previous handlers back (for a worker run inside a longer-lived process). Signals can only
        be handled in the main thread; elsewhere this does nothing.
        """
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }

        def restore() -> None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        return restore

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals > 1:
            logger.warning(
                "worker.forced_exit id=%s signal=%s in_flight=%s (leases will expire)",
                self.worker_id,
                name,
                self.in_flight,
            )
            sys.stderr.flush()
            os._exit(FORCED_EXIT_CODE)
        self.stop(f"signal {name}")

    def _shutdown(self) -> None:
        """Stop claiming, wait up to ``grace`` for in-flight jobs, release the rest, join."""
        self._stopping.set()
        self._release(self._prefetched())
        deadline = (self._stop_at or time.monotonic()) + self.grace
        # Attempts the worker already ended (timeouts, cancels) are not waited for: their
        # handlers may never return, and nothing of theirs will be written.
        while self.running and time.monotonic() < deadline:
            self._wake.clear()
            try:
                self._flush_completions()
            except DatabaseError as exc:
                # _stopping is set, so wait here, not in _database_error, and not past the grace.
                self._database_error("complete", exc, wait=False)
                time.sleep(min(self._backoff(), max(0.0, deadline - time.monotonic())))
            self._wake.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        self._stop_listener()
        self._stop_watchdog()
        self._release(self._left())
        self._abandon.set()
        self._stop_async()  # cancels the async handlers just released, stops the loop
        self._heartbeat_stop.set()
        for lane in self._lanes:
            for _ in range(lane.threads):
                lane.work.put(None)
        for thread in self._threads:
            thread.join(timeout=1.0)
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join(timeout=max(self.heartbeat, 1.0))
        execution.close_old_connections()

    def _left(self) -> list[Slot]:
        with self._in_flight_lock:
            return list(self._in_flight.values())

    def _prefetched(self) -> list[Slot]:
        """Claimed jobs that would wait for a busy thread (or a full async limit): at a stop
        they are handed back at once. Those an idle thread is about to take start and get the
        grace period like the running ones."""
        waiting: list[Slot] = []
        slots = self._left()
        with self._in_flight_lock:  # handlers still running after the worker ended them
            ended = list(self._ended.values())
        # Async slots share the event loop's limit; sync ones each lane's threads.
        rooms: dict[Lane | None, int] = {None: self.async_concurrency}
        rooms.update((lane, lane.threads) for lane in self._lanes)
        for group, room in rooms.items():
            mine = [slot for slot in slots if self._group(slot) is group]
            busy = sum(1 for slot in mine if slot.started)
            busy += sum(1 for slot in ended if self._group(slot) is group)
            idle = max(0, room - busy)
            waiting += [slot for slot in mine if not slot.started][idle:]
        return waiting

    def _group(self, slot: Slot) -> Lane | None:
        """What a slot waits for: the event loop (``None``) or its lane's threads."""
        return None if slot.is_async else self._lane_of(slot)

    def _release(self, slots: list[Slot]) -> None:
        """Hand back these jobs, but those already being reported or released."""
        for slot in slots:
            with slot.lock:
                if slot.reporting or slot.released or slot.ended_at is not None:
                    continue
                slot.released = True
            slot.lease_lost.set()  # a cooperative handler stops; its result is never written
            try:
                outcome = protocol.release(*slot.token)
            except DatabaseError as exc:
                logger.warning(
                    "worker.database_error id=%s where=release job=%s error=%s "
                    "(the lease will expire instead)",
                    self.worker_id,
                    slot.job.pk,
                    headline(exc),
                )
                execution.close_old_connections()
                continue
            self._count(slot, outcome)
