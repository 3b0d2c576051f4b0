"""How many jobs the worker claims, and when: sized to the work, not to the freed thread.

Claiming only for free threads costs a claim (and a flush) per job or two when handlers are
short, and the database round trip, not the handler, sets the pace. Claiming far ahead hurts the
other way: jobs held by one busy worker wait while an idle worker could run them. So the worker
keeps a small **prefetch** of claimed, not yet started jobs, sized from how fast its threads
finish: enough to keep them busy for :data:`HORIZON` seconds (about one claim round trip and
the loop's turn), never more than ``batch``. Long jobs get no prefetch at all: a thread that
frees up triggers a claim for itself, as before.

The loop claims when the free room (threads plus prefetch, minus jobs held) reaches the
**low mark**, half the prefetch (at least one job), so one claim and one grouped completion
serve many jobs. Prefetched jobs are in flight like running ones: the heartbeat renews their
leases and shutdown releases them at once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .completions import Completer
    from .slots import InFlight, Lane

HORIZON = 0.05
"""Seconds of work the prefetch should cover at the pool's measured pace."""

SMOOTHING = 0.2
"""Weight of the newest handler duration in the running mean."""


class ClaimSizer:
    """The prefetch and low mark for a pool of ``concurrency`` threads, learnt from durations.

    Until the first handler returns, nothing is known: no prefetch (safe for long jobs); the
    first fast jobs raise it at once.
    """

    def __init__(self, concurrency: int, batch: int) -> None:
        self.concurrency = concurrency
        self.batch = batch
        self.mean_duration: float | None = None
        """Written by the runners of its lane (:meth:`observe`), read by the claim loop and
        the runners, without a lock: see :meth:`observe`."""

    def observe(self, seconds: float) -> None:
        """Fold one handler's run time into the running mean (races between threads are
        harmless: a lost update only delays the estimate by one job)."""
        mean = self.mean_duration
        self.mean_duration = seconds if mean is None else mean + SMOOTHING * (seconds - mean)

    @property
    def prefetch(self) -> int:
        """Claimed jobs allowed to wait for a thread: ``HORIZON`` seconds of the pool's work."""
        mean = self.mean_duration
        if mean is None:
            return 0
        pace = self.concurrency / max(mean, 1e-6)  # jobs the pool finishes per second
        return min(self.batch, math.floor(pace * HORIZON))

    @property
    def capacity(self) -> int:
        """Jobs this worker may hold at once: one per thread plus the prefetch."""
        return self.concurrency + self.prefetch

    @property
    def low_mark(self) -> int:
        """Free room that triggers the next claim."""
        return max(1, self.prefetch // 2)

    def wanted(self, held: int, extra: int = 0) -> int:
        """Jobs to claim now, given ``held`` claimed and not yet finished and ``extra`` slots
        beside the threads (the worker's async slots); 0 below the low mark."""
        free = self.capacity + extra - held
        if free < self.low_mark:
            return 0
        return min(free, self.batch)


class ClaimRoom:
    """How many jobs the next claim may take, per lane, from what the worker holds now.

    Read by the claim loop before each claim and by the runners when a handler returns (is
    there room enough to wake the loop?).
    """

    def __init__(
        self, lanes: list[Lane], slots: InFlight, completer: Completer, async_slots: int
    ) -> None:
        self.lanes = lanes
        self.slots = slots
        self.completer = completer
        self.async_slots = async_slots
        """``async_concurrency`` when the worker runs an event loop, else 0."""
        self.async_recent = False
        """Whether the latest claim that took jobs brought an async one. Written by the claim
        loop only, read by it and (through :meth:`wanted`) by the runners without a lock: a
        stale read only moves their wake-up of the loop by one turn."""

    def held(self, lane: Lane | None = None) -> int:
        """Jobs claimed and not finished: running or waiting to start (not those whose
        completion only waits for the next flush), and handlers still running after the
        worker ended their attempt (a stuck thread is not free); of ``lane`` alone when the
        worker has several (``None``: all of them)."""
        if lane is None or len(self.lanes) == 1:
            return self.slots.total - self.completer.waiting()
        return self.slots.held_by(lane) - self.completer.waiting(lane)

    def wanted(self, lane: Lane | None = None) -> int:
        """How many jobs the next claim may take (0 while below the low mark).

        The pool's threads plus the prefetch of :class:`ClaimSizer`, plus the async slots
        while the latest claim brought async jobs. A claim cannot tell which kind a due job is:
        counting the async slots always would let a worker of a project that has any async
        handler sit on a hundred long sync jobs its threads cannot start. The first async job
        a claim brings opens them; a claim of sync jobs alone closes them, leaving room for one
        job more than the threads, so async work is still found while every thread is busy.
        Jobs beyond the free threads or ``async_concurrency`` wait, in flight, their leases
        renewed by the heartbeat. While a handler whose attempt the worker ended still holds a
        thread, that one job more is not taken: a sync job could wait behind a thread that may
        never free, its lease renewed, when another worker could run it. With thread budgets
        each lane is sized alone (``lane``; ``None``: the first).
        """
        lane = lane or self.lanes[0]
        extra = 0
        if self.async_slots:
            extra = self.async_slots if self.async_recent else int(not self.slots.any_ended)
        return lane.sizer.wanted(self.held(lane), extra)
