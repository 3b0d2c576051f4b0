"""The in-flight slots: every attempt the worker holds, the life of each, and the locks.

A claimed job gets a :class:`Slot`, which lives in :class:`InFlight` until it settles. The
threads that touch a slot (the claim loop, its runner, the watchdog, shutdown, the heartbeat,
the flush) never flip flags of their own: the slot has one ``state``, and each thread moves it
with a transition method that takes the slot's lock and says whether it won (the table's
:class:`Move`, or ``None``: another thread moved it first, and the caller does nothing). Only
the winner does the move's work (writes, logs, counts), so each is done once. As River's
producer and Oban's own ``running`` map: one owner per field, here the slot for its state.

Its life (state, who moves it out, by which method, to what)::

    state           moved out by                        method             to
    --------------  ----------------------------------  -----------------  --------------
    queued          its runner takes it                 try_start          running
    queued/running  its runner: a result to write       try_write *        writing
    queued/running  shutdown hands the job back         try_release *      released
    queued/running  the watchdog (timeout, cancel)      try_end *          ended
    queued/running  its runner's thread is free         try_return         settled
    writing         its runner: a plain success         try_group          grouped
    writing         its runner: result written          try_return         settled
    grouped         the flush wrote it                  try_complete       settled
    released        its runner returned (or never ran)  try_return         settled
    ended           the watchdog wrote the end          try_end_written    end_written
    ended           its runner returned                 try_return         ended_returned
    ended_returned  the watchdog wrote the end          try_end_written    settled
    end_written     the watchdog, a heartbeat later     try_stick          stuck
    end_written     its runner returned                 try_return         settled
    stuck           its runner returned (unstuck)       try_return         settled

    * under ``InFlight.gate`` (try_write: from queued only for an async job interrupted
      before it started). Each is followed by a write that ends the attempt in the database;
      the gate keeps it from running while the heartbeat renews the slot's lease, which would
      then find the row gone and call the lease lost.

``settled`` is final. A slot reaches it once, by one winner, and :class:`InFlight` is the one
place where it then leaves flight (:meth:`InFlight.returned`, :meth:`~InFlight.completed`,
:meth:`~InFlight.end_written` move and take it out together).

The lock order, the only nesting of these locks: ``InFlight.gate`` -> ``Slot.lock`` (a runner
marks its slot writing, the watchdog ends it, shutdown releases it) and ``InFlight.gate`` ->
``InFlight._lock`` (the heartbeat's snapshot of renewable slots). A slot's lock and
``InFlight._lock`` are never held together: the dictionaries are changed after the slot's
move, never during it.
"""

from __future__ import annotations

import enum
import queue as queue_module
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..models import Job
from .claim_sizing import ClaimSizer
from .context import Cancellation
from .execution import Execution
from .flags import Flag


class SlotState(enum.StrEnum):
    """Where a slot is in its life (see the module's table)."""

    QUEUED = "queued"
    """Claimed, in flight, waiting for its runner (a pool thread, the event loop)."""
    RUNNING = "running"
    """Its runner took it: the handler runs (or is about to)."""
    WRITING = "writing"
    """The handler returned and its runner writes the result: not renewed, not released."""
    GROUPED = "grouped"
    """A plain success waiting for the claim loop's flush (:mod:`.completions`)."""
    RELEASED = "released"
    """Shutdown handed the job back: its result is never written."""
    ENDED = "ended"
    """The watchdog ended the attempt under its handler (timeout, cancel) and writes the end;
    the token is spent, the handler's thread still taken."""
    END_WRITTEN = "end_written"
    """The end is in the database; the handler still runs."""
    STUCK = "stuck"
    """The handler still ran a heartbeat interval after the end was written (counted)."""
    ENDED_RETURNED = "ended_returned"
    """The handler returned before the end was written: the watchdog's write settles it."""
    SETTLED = "settled"
    """Final: out of flight."""


class Move(NamedTuple):
    """A won transition: the state the slot left and the one it entered."""

    before: SlotState
    after: SlotState


def _table(after: SlotState, *before: SlotState) -> dict[SlotState, Move]:
    return {state: Move(state, after) for state in before}


_S = SlotState
START = _table(_S.RUNNING, _S.QUEUED)
WRITE = _table(_S.WRITING, _S.QUEUED, _S.RUNNING)
RELEASE = _table(_S.RELEASED, _S.QUEUED, _S.RUNNING)
END = _table(_S.ENDED, _S.QUEUED, _S.RUNNING)
GROUP = _table(_S.GROUPED, _S.WRITING)
COMPLETE = _table(_S.SETTLED, _S.GROUPED)
END_WRITTEN = {**_table(_S.END_WRITTEN, _S.ENDED), **_table(_S.SETTLED, _S.ENDED_RETURNED)}
STICK = _table(_S.STUCK, _S.END_WRITTEN)
RETURN = {
    **_table(_S.SETTLED, _S.QUEUED, _S.RUNNING, _S.WRITING, _S.RELEASED, _S.END_WRITTEN, _S.STUCK),
    **_table(_S.ENDED_RETURNED, _S.ENDED),
}
TRANSITIONS: dict[str, dict[SlotState, Move]] = {
    "try_start": START,
    "try_write": WRITE,
    "try_release": RELEASE,
    "try_end": END,
    "try_group": GROUP,
    "try_complete": COMPLETE,
    "try_end_written": END_WRITTEN,
    "try_stick": STICK,
    "try_return": RETURN,
}
"""The module's table, by method: the state a call moves the slot from, and to."""

ENDED_STATES = frozenset({_S.ENDED, _S.END_WRITTEN, _S.STUCK, _S.ENDED_RETURNED})
"""The watchdog ended the attempt: the slot is in ``InFlight``'s ended dictionary."""
RENEWABLE = frozenset({_S.QUEUED, _S.RUNNING})
"""States whose lease the heartbeat renews."""


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
    """One in-flight attempt: its ``state``, moved only by the ``try_*`` methods under ``lock``.

    The other fields are written once by the thread that sets it, before another thread looks,
    unless a field says otherwise.
    """

    job: Job
    lane: Lane | None = None
    """The lane whose claim took it, whose threads run it (``None``: the worker's first)."""
    state: SlotState = SlotState.QUEUED
    """Written under ``lock`` by the transition methods only; read without it (one attribute:
    a read is a state it was in, and only a move under the lock acts on it)."""
    lease_lost: Flag = field(default_factory=Flag)
    """Set by the heartbeat (lease lost) or shutdown (released); read by the handler."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    duration: float = 0.0
    """Seconds the handler ran, for the log line of its outcome (its runner, or the winner of
    :meth:`try_end` / :meth:`try_release`, under ``lock``)."""
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
    """``time.monotonic()`` when the watchdog ended the attempt (by :meth:`try_end`); a
    heartbeat interval later a handler still running is stuck."""
    end_reason: str = ""
    """Why it was ended (``timeout``, ``cancelled``), by :meth:`try_end`."""

    @property
    def token(self) -> tuple[int, int]:
        return (self.job.pk, self.job.attempt)

    @property
    def result(self) -> Any:
        return self.execution.result if self.execution is not None else None

    @property
    def ended(self) -> bool:
        """The watchdog ended the attempt: its token is spent, its result refused."""
        return self.state in ENDED_STATES

    def _move(self, table: dict[SlotState, Move]) -> Move | None:
        with self.lock:
            move = table.get(self.state)
            if move is not None:
                self.state = move.after
            return move

    def try_start(self) -> Move | None:
        """Its runner takes it; lost: released or ended before it started (nothing runs)."""
        return self._move(START)

    def try_write(self) -> Move | None:
        """Its runner has a result to write; call it under ``InFlight.gate`` (the heartbeat
        then never renews a job being completed). Lost: released or ended meanwhile."""
        return self._move(WRITE)

    def try_group(self) -> Move | None:
        """Its runner's plain success waits for the flush (set ``execution`` first)."""
        return self._move(GROUP)

    def try_complete(self) -> Move | None:
        """The flush wrote its success (through :meth:`InFlight.completed`)."""
        return self._move(COMPLETE)

    def try_release(self) -> Move | None:
        """Shutdown hands the job back; the winner sets ``lease_lost`` and writes the release."""
        with self.lock:
            move = RELEASE.get(self.state)
            if move is not None:
                self.state = move.after
                if self.handler_started is not None:  # its line says how long it ran
                    self.duration = time.monotonic() - self.handler_started
            return move

    def try_end(self, reason: str) -> Move | None:
        """The watchdog ends the attempt under its handler (through :meth:`InFlight.end`)."""
        with self.lock:
            move = END.get(self.state)
            if move is not None:
                self.state = move.after
                self.ended_at = time.monotonic()
                self.end_reason = reason
                if self.handler_started is not None:  # for the log line of the outcome
                    self.duration = self.ended_at - self.handler_started
            return move

    def try_end_written(self) -> Move | None:
        """The watchdog's write of the end landed (through :meth:`InFlight.end_written`)."""
        return self._move(END_WRITTEN)

    def try_stick(self) -> Move | None:
        """The watchdog finds the handler still running a heartbeat after the end."""
        return self._move(STICK)

    def try_return(self) -> Move | None:
        """Its runner's thread is free (through :meth:`InFlight.returned`); lost: grouped (the
        flush settles it) or already returned."""
        return self._move(RETURN)


class InFlight:
    """Every slot the worker holds: live ones by job id, ended ones by attempt token.

    A live slot is an attempt whose end the worker still has to write (running, waiting for a
    runner, or waiting for the grouped completion). An ended one is an attempt the watchdog ended
    (timeout, cancel) under a handler that still runs: the job may already run again here
    under a newer attempt, and its thread is still taken.

    Both dictionaries are written under ``_lock`` only: :meth:`add` by the claim loop,
    :meth:`end` by the watchdog, and :meth:`_leave`, the one place a slot leaves flight, by the
    winner of a move to ``settled``. Lists are read under it; the counts are read without it
    (``len`` of a dict is atomic; a count one job old only moves a claim or a wake-up by one
    turn). Lock order: see the module's docstring.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, Slot] = {}
        self._ended: dict[tuple[int, int], Slot] = {}
        self.gate = threading.Lock()
        """Held by the heartbeat around its snapshot and statement, and briefly by a runner to
        mark its slot ``writing``: a job that has just been completed is never heartbeated
        (which would misread it as a lost lease). Taken before a slot's lock or ``_lock``."""

    @property
    def running(self) -> int:
        """Attempts whose end the worker still has to write (not ended under their handler)."""
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

    def end(self, slot: Slot, reason: str) -> Move | None:
        """The watchdog ends the attempt (:meth:`Slot.try_end`, under ``gate``): if it wins, the
        slot's thread stays taken and its job id is free for a retry."""
        with self.gate:
            move = slot.try_end(reason)
        if move is not None:
            with self._lock:
                if self._live.get(slot.job.pk) is slot:
                    del self._live[slot.job.pk]
                self._ended[slot.token] = slot
        return move

    def release(self, slot: Slot) -> Move | None:
        """Shutdown hands the job back (:meth:`Slot.try_release`, under ``gate``)."""
        with self.gate:
            return slot.try_release()

    def returned(self, slot: Slot) -> Move | None:
        """Its runner's thread is free: :meth:`Slot.try_return`, out of flight if settled."""
        move = slot.try_return()
        if move is not None and move.after is SlotState.SETTLED:
            self._leave((slot,))
        return move

    def end_written(self, slot: Slot) -> Move | None:
        """The watchdog wrote the end: :meth:`Slot.try_end_written`, out if settled."""
        move = slot.try_end_written()
        if move is not None and move.after is SlotState.SETTLED:
            self._leave((slot,))
        return move

    def completed(self, slots: list[Slot]) -> list[Slot]:
        """The flush wrote these grouped successes: each settles and leaves (returned)."""
        settled = [slot for slot in slots if slot.try_complete() is not None]
        self._leave(settled)
        return settled

    def _leave(self, slots: Iterable[Slot]) -> None:
        """The one place a slot leaves flight, called by the winner of its move to settled."""
        with self._lock:
            for slot in slots:
                if self._live.get(slot.job.pk) is slot:
                    del self._live[slot.job.pk]
                elif self._ended.get(slot.token) is slot:
                    del self._ended[slot.token]

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
        """Slots whose lease the heartbeat renews: queued or running (not being written,
        released or ended). Call it under ``gate``."""
        with self._lock:
            return [s for s in self._live.values() if s.state in RENEWABLE]

    def held_by(self, lane: Lane) -> int:
        """Slots claimed for ``lane``, live or ended."""
        with self._lock:
            held = sum(1 for slot in self._live.values() if slot.lane is lane)
            return held + sum(1 for slot in self._ended.values() if slot.lane is lane)
