"""The in-flight slots: every attempt the worker holds, and the lock that guards them.

A claimed job gets a :class:`Slot`, which lives in :class:`InFlight` until its outcome is
written (or the job is handed back). Threads coordinate through the slot's flags under the
slot's own ``lock``; :class:`InFlight` owns the two dictionaries of slots, under its lock, and
``gate``, the lock between the heartbeat's renewal and a report.
"""

from __future__ import annotations

import queue as queue_module
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..models import Job
from .claim_sizing import ClaimSizer
from .context import Cancellation
from .execution import Execution


@dataclass(eq=False)
class Lane:
    """Queues and the pool threads that serve them, with their own claims.

    A worker has one lane for all its queues (``--queues a,b``: one shared pool), or one per
    queue when each has a thread budget (``--queues mail:10,reports:2``): a lane claims only
    for its own free threads, so a queue full of slow jobs cannot take another's threads.
    """

    queues: list[str] | None
    threads: int
    sizer: ClaimSizer
    work: queue_module.SimpleQueue[Slot | None] = field(default_factory=queue_module.SimpleQueue)
    """Claimed slots for this lane's threads. SimpleQueue: put and get in C, without Queue's
    Python-level condition variables, on the path every job takes to a pool thread."""

    @property
    def name(self) -> str:
        return ",".join(self.queues) if self.queues is not None else "*"


@dataclass(slots=True)
class Slot:
    """One in-flight attempt and the flags the threads coordinate through.

    Written once by the thread that sets it, before another thread looks, unless a field says
    otherwise: ``lock`` guards the flags that several threads race for.
    """

    job: Job
    lane: Lane | None = None
    """The lane whose claim took it, whose threads run it (``None``: the worker's first)."""
    lease_lost: threading.Event = field(default_factory=threading.Event)
    """Set by the heartbeat (lease lost) or shutdown (released); read by the handler."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    duration: float = 0.0
    """Seconds the handler ran, for the log line of its outcome (its runner or the watchdog)."""
    reporting: bool = False
    """Set (under ``InFlight.gate`` and ``lock``) by the runner when the handler has returned
    and its result is being written: the heartbeat stops renewing it and a shutdown no longer
    releases it."""
    released: bool = False
    """Set under ``lock`` when shutdown handed the job back: its result is then never
    reported."""
    started: bool = False
    """Set under ``lock`` when a runner takes the slot: until then it is a prefetched job,
    released at once by a shutdown."""
    execution: Execution | None = None
    """The handler's success, while it waits in the grouped completions."""
    is_async: bool = False
    """An ``async def`` handler: it runs on the worker's event loop, not a pool thread (set by
    the claim loop before the slot is handed over)."""
    cancel_handler: Callable[[], object] | None = None
    """Cancels an async handler's task; set and called on the event loop only."""
    cancellation: Cancellation = field(default_factory=Cancellation)
    """The handler's ``ctx.cancelled``: set when the worker ends the attempt under it."""
    handled: Execution | None = None
    """The running handler's execution, once it started: the watchdog's write needs it (a
    task's backoff and ``task_finished``)."""
    timeout: float | None = None
    handler_started: float | None = None
    """``time.monotonic()`` when the handler was called."""
    deadline: float | None = None
    """``time.monotonic()`` at which the handler times out; None: no timeout, or not started.
    Written by the runner, read by the watchdog."""
    ended_at: float | None = None
    """Set (under ``lock``) when the watchdog ended the attempt (timeout or cancel) while the
    handler still ran: its token is spent, it is no longer renewed or released, and its
    thread still counts against ``concurrency`` until the handler returns."""
    end_reason: str = ""
    end_written: bool = False
    """The end of the attempt is in the database (a write that failed is tried again); under
    ``lock``."""
    returned: bool = False
    """The handler returned (its pool thread is free); set under ``lock``."""
    stuck: bool = False
    """The handler still ran one heartbeat interval after its attempt was ended (watchdog)."""

    @property
    def token(self) -> tuple[int, int]:
        return (self.job.pk, self.job.attempt)

    @property
    def result(self) -> Any:
        return self.execution.result if self.execution is not None else None


class InFlight:
    """Every slot the worker holds: live ones by job id, ended ones by attempt token.

    A live slot is an attempt the worker still has to report (running, waiting for a runner,
    or waiting for the grouped completion). An ended one is an attempt the watchdog ended
    (timeout, cancel) under a handler that still runs: the job may already run again here
    under a newer attempt, and its thread is still taken.

    Both dictionaries are written under ``_lock`` only: :meth:`add` by the claim loop,
    :meth:`forget` by whoever wrote the outcome (a pool or reporter thread, the claim loop's
    flush, shutdown), :meth:`end` and :meth:`settle` by the watchdog and the runners. Lists
    are read under it; the counts are read without it (``len`` of a dict is atomic; a count one
    job old only moves a claim or a wake-up by one turn).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, Slot] = {}
        self._ended: dict[tuple[int, int], Slot] = {}
        self.gate = threading.Lock()
        """Held by the heartbeat around its snapshot and statement, and briefly by a runner to
        mark its slot ``reporting``: a job that has just been completed is never heartbeated
        (which would misread it as a lost lease)."""

    @property
    def running(self) -> int:
        """Attempts the worker still has to report (not ended under their handler)."""
        return len(self._live)

    @property
    def total(self) -> int:
        """Slots holding a runner, stuck ones included: the capacity they take is real."""
        return len(self._live) + len(self._ended)

    @property
    def any_ended(self) -> bool:
        """A handler whose attempt the worker ended still holds its thread."""
        return bool(self._ended)

    def get(self, job_id: int) -> Slot | None:
        return self._live.get(job_id)

    def add(self, slot: Slot) -> None:
        with self._lock:
            self._live[slot.job.pk] = slot

    def forget(self, slots: list[Slot]) -> None:
        """Take finished (or released) slots out of flight: the one place a live slot leaves."""
        with self._lock:
            for slot in slots:
                self._live.pop(slot.job.pk, None)

    def end(self, slot: Slot) -> None:
        """The watchdog ended the attempt: its thread stays taken, its job id is free."""
        with self._lock:
            if self._live.get(slot.job.pk) is slot:
                del self._live[slot.job.pk]
            self._ended[slot.token] = slot

    def settle(self, slot: Slot) -> None:
        """An ended attempt is written and its handler returned: the slot leaves for good."""
        with self._lock:
            self._ended.pop(slot.token, None)

    def live(self) -> list[Slot]:
        with self._lock:
            return list(self._live.values())

    def ended(self) -> list[Slot]:
        with self._lock:
            return list(self._ended.values())

    def snapshot(self) -> tuple[list[Slot], list[Slot]]:
        """The live and the ended slots, read together."""
        with self._lock:
            return list(self._live.values()), list(self._ended.values())

    def renewable(self) -> list[Slot]:
        """Slots whose lease the heartbeat renews: not being reported, released or ended.
        Call it under ``gate``."""
        with self._lock:
            return [
                s
                for s in self._live.values()
                if not (s.reporting or s.released or s.ended_at is not None)
            ]

    def held_by(self, lane: Lane) -> int:
        """Slots claimed for ``lane``, live or ended."""
        with self._lock:
            held = sum(1 for slot in self._live.values() if slot.lane is lane)
            return held + sum(1 for slot in self._ended.values() if slot.lane is lane)
