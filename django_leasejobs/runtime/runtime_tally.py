"""The worker's runtime counts: kept in memory per job name, added to the database per beat.

Every outcome the worker counts (``WorkerState._count``) adds the handler's runtime here, and
a refused (stale) report or a recovered expiry its count, under one small lock and without a
statement. :mod:`.runtime_flush` writes them.
"""

from __future__ import annotations

import threading

from ..protocol import Outcome
from ..upkeep import RuntimeCounts

NOT_RUNS = (Outcome.RELEASED, Outcome.CANCELLED)
"""Outcomes whose handler time says nothing of the job's runtime: handed back at shutdown,
or cut short by an operator's cancel."""


class Tally:
    """Runtime counts per job name since the last flush (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, RuntimeCounts] = {}

    def _entry(self, name: str) -> RuntimeCounts:
        return self._counts.setdefault(name, RuntimeCounts())

    def outcome(
        self, name: str, seconds: float, outcome: Outcome, *, ran: bool, lease: float
    ) -> None:
        """One reported attempt: its runtime when its handler ran to an end, a stale report."""
        with self._lock:
            entry = self._entry(name)
            entry.lease_seconds = lease
            if ran and outcome not in NOT_RUNS:
                entry.run(seconds)
            if outcome is Outcome.STALE:
                entry.stale += 1

    def recovered(self, names: list[str]) -> None:
        """Expired leases this worker's lease recovery took back."""
        with self._lock:
            for name in names:
                self._entry(name).recovered += 1

    def take(self) -> dict[str, RuntimeCounts]:
        with self._lock:
            counts, self._counts = self._counts, {}
        return counts

    def put_back(self, counts: dict[str, RuntimeCounts]) -> None:
        with self._lock:
            for name, entry in counts.items():
                self._entry(name).add(entry)
