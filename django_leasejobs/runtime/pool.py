"""The pool threads: each runs one handler at a time, outside any transaction, and reports it.

A report that fails on a database error is retried with capped backoff: the write is guarded by
the attempt token, so a late or repeated write can never overwrite a newer result.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import Error as DatabaseError
from django.db import connections

from ..protocol import Outcome
from . import execution
from .completions import GroupedCompletions
from .watchdog import Watchdog
from .worker_state import RECONNECT, Lane, Slot, headline

logger = logging.getLogger("django_leasejobs")


class PoolThreads(GroupedCompletions, Watchdog):
    def _start_pool(self) -> None:
        for lane in self._lanes:
            prefix = "leasejobs" if len(self._lanes) == 1 else f"leasejobs-{lane.name}"
            for index in range(lane.threads):
                thread = threading.Thread(
                    target=self._pool_thread, args=(lane,), name=f"{prefix}-{index}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _pool_thread(self, lane: Lane) -> None:
        # Daemon threads: after a grace period a handler that will not return must not keep
        # the process alive (its job has been released).
        self.connection_keeper.adopt()
        try:
            while True:
                slot = self.connection_keeper.get(lane.work)  # closes an idle connection
                if slot is None:
                    return
                deferred = False
                try:
                    deferred = self._work(slot)
                except BaseException:  # nothing a handler raises may kill the thread
                    # Unreported, the job's lease expires and lease recovery retries it.
                    logger.exception("worker.thread_error id=%s job=%s", self.worker_id, slot.token)
                finally:
                    self._returned(slot, deferred)
        finally:
            connections.close_all()

    def _returned(self, slot: Slot, deferred: bool) -> None:
        """The thread is free: its slot leaves the in-flight set, unless a grouped completion
        or the watchdog's unwritten end of the attempt still needs it."""
        if not self._ended_returned(slot) and not deferred:
            self._forget([slot])
        if self._claim_room(self._lane_of(slot)) or not self._held():
            self._wake.set()  # room for a claim (or nothing left): the loop's turn

    def _work(self, slot: Slot) -> bool:
        """Run the handler and report it; True if its completion waits for the next flush."""
        with slot.lock:
            if slot.released or slot.ended_at is not None:  # ended before it started
                return False
            slot.started = True
        began = time.monotonic()
        result = execution.execute(
            slot.job,
            self.worker_id,
            slot.lease_lost,
            cancellation=slot.cancellation,
            on_start=self._on_start(slot),
        )
        slot.duration = time.monotonic() - began
        self._lane_of(slot).sizer.observe(slot.duration)
        with self._gate, slot.lock:
            if slot.released:
                return False
            if slot.ended_at is None:
                slot.reporting = True
        if slot.ended_at is not None:
            self._refuse_late(slot)  # the worker ended this attempt: its token is spent
            return False
        if self._groupable(result):
            slot.execution = result
            with self._completions_lock:
                self._completions.append(slot)
            return True
        self._count(slot, self._report(result))
        return False

    def _report(self, result: execution.Execution) -> Outcome:
        """Write the result; on a database error retry with backoff (the write is fenced)."""
        errors = 0
        while True:
            try:
                return execution.report(result)
            except DatabaseError as exc:
                errors += 1
                delay = RECONNECT.ceiling(errors)
                logger.warning(
                    "worker.database_error id=%s where=report job=%s retry_in=%.2f error=%s",
                    self.worker_id,
                    result.job.pk,
                    delay,
                    headline(exc),
                )
                execution.close_old_connections()
                if self._abandon.wait(delay):
                    # Shutdown gave up: the lease expires and the job runs again elsewhere.
                    return Outcome.STALE
