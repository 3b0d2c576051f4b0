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
