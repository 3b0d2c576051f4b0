"""The pool threads: each runs one handler at a time, outside any transaction, and writes its
result.

Sync handlers run here, ``async def`` ones on :mod:`.async_runner`'s event loop; both are an
:class:`Executor`, so the claim loop hands a slot to whichever accepts its job. Each lane (see
:class:`~.slots.Lane`) has its own threads and its own queue of claimed slots.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from django.db import connections

from ..models import Job
from . import execution, threads
from .claim_sizing import ClaimRoom
from .connection_keeper import ConnectionKeeper
from .result_writing import ResultWriter
from .slots import Lane, Slot
from .watchdog import Watchdog

logger = logging.getLogger("django_leasejobs")


class Executor(Protocol):
    """Runs claimed slots' handlers on threads of its own and writes their results."""

    @property
    def capacity(self) -> int:
        """Handlers it runs at once; slots beyond wait for one to return."""
        ...

    def accepts(self, job: Job) -> bool:
        """Whether this executor runs ``job``'s handler."""
        ...

    def start(self) -> None: ...

    def submit(self, slot: Slot) -> None:
        """Run the slot's handler (already in flight) once there is room; from the claim loop."""
        ...

    def shutdown(self) -> None:
        """After shutdown released what had not started: stop and join its threads."""
        ...


class ThreadPool:
    """The pool threads of every lane."""

    def __init__(
        self,
        *,
        worker_id: str,
        lanes: list[Lane],
        keeper: ConnectionKeeper,
        writer: ResultWriter,
        watchdog: Watchdog,
        room: ClaimRoom,
        wake: threading.Event,
    ) -> None:
        self.worker_id = worker_id
        self.lanes = lanes
        self.keeper = keeper
        self.writer = writer
        self.watchdog = watchdog
        self.room = room
        self.wake = wake
        """``Control.wake``: set when a thread frees room enough for the claim loop."""
        self.threads: list[threading.Thread] = []
        """Started and joined by the main thread."""

    @property
    def capacity(self) -> int:
        return sum(lane.threads for lane in self.lanes)

    def accepts(self, job: Job) -> bool:
        return True

    def submit(self, slot: Slot) -> None:
        (slot.lane or self.lanes[0]).work.put(slot)

    def start(self) -> None:
        for lane in self.lanes:
            prefix = "leasejobs" if len(self.lanes) == 1 else f"leasejobs-{lane.name}"
            for index in range(lane.threads):
                self.threads.append(threads.start(self._thread, lane, name=f"{prefix}-{index}"))

    def shutdown(self) -> None:
        for lane in self.lanes:
            for _ in range(lane.threads):
                lane.work.put(None)
        for thread in self.threads:
            thread.join(timeout=1.0)

    def _thread(self, lane: Lane) -> None:
        # Daemon threads: after a grace period a handler that will not return must not keep
        # the process alive (its job has been released).
        self.keeper.adopt()
        try:
            while True:
                slot = self.keeper.get(lane.work)  # closes an idle connection
                if slot is None:
                    return
                try:
                    self._work(slot)
                except BaseException:  # nothing a handler raises may kill the thread
                    # Unwritten, the job's lease expires and lease recovery retries it.
                    logger.exception("worker.thread_error id=%s job=%s", self.worker_id, slot.token)
                finally:
                    self._returned(slot)
        finally:
            connections.close_all()

    def _returned(self, slot: Slot) -> None:
        """The thread is free: its slot leaves the in-flight set, unless a grouped completion
        or the watchdog's unwritten end of the attempt still needs it."""
        self.watchdog.ended_returned(slot)
        if self.room.wanted(slot.lane) or not self.room.held():
            self.wake.set()  # room for a claim (or nothing left): the loop's turn

    def _work(self, slot: Slot) -> bool:
        """Run the handler and write its result; True if its completion waits for the next flush."""
        if slot.try_start() is None:  # released or ended before it started
            return False
        began = time.monotonic()
        result = execution.execute(
            slot.job,
            self.worker_id,
            slot.lease_lost,
            cancellation=slot.cancellation,
            on_start=self.watchdog.on_start(slot),
        )
        slot.duration = time.monotonic() - began
        (slot.lane or self.lanes[0]).sizer.observe(slot.duration)
        return self.writer.finished(slot, result)
