"""The worker's accounts: the run's summary, the stuck handlers, the runtime counts per job name.

Every thread that learns an outcome counts it here (:meth:`Ledger.count`): one log line unless
the protocol wrote its own, one console line, the summary, and the job's runtime for the
lease advisor (:mod:`.runtime_tally`), which the heartbeat flushes to the per-hour rows once
a beat and the worker once more when it stops (a flush that fails puts its counts back).
"""

from __future__ import annotations

import logging
import threading

from django.db import Error as DatabaseError

from .. import protocol, upkeep
from ..protocol import Outcome
from ..reports.summary import Summary
from .console import Console
from .context import TIMEOUT
from .outage import headline
from .runtime_tally import Tally
from .slots import Slot

logger = logging.getLogger("django_leasejobs")

WORKER_LINES = (Outcome.SUCCEEDED, Outcome.RELEASED, Outcome.SNOOZED)
"""Outcomes whose log line the worker writes (one line per state change): it knows their name,
queue and duration without a query (a snooze's write logs nothing of its own). The protocol
writes its own line for a retry, a timeout, a dead letter, a cancel and a refused (stale)
write, as it alone knows the error and the reason."""


def _error_of(slot: Slot) -> str:
    """Why the attempt failed, in one line, when the worker knows it (for the console)."""
    if slot.end_reason == TIMEOUT:
        return f"timed out after {slot.timeout or 0:g} s"
    handled = slot.handled or slot.execution
    failure = handled.failure if handled is not None else None
    return failure.headline if failure is not None else ""


class Ledger:
    """What the worker counts. ``summary`` and the stuck set are written under ``_lock`` by
    every thread; the summary is read whole once the run ended (and ``claimed`` by the claim
    loop, the only thread that writes it). ``runtimes`` has its own lock."""

    def __init__(self, worker_id: str, lease: float, heartbeat: float, console: Console | None):
        self.worker_id = worker_id
        self.lease = lease
        """The worker's lease, recorded with a job's runtimes when the job has none of its own."""
        self.heartbeat = heartbeat
        self.console = console
        """Where people read one line per finished attempt (``runjobworker``'s stdout)."""
        self.summary = Summary(worker_id)
        self.runtimes = Tally()
        """Runtimes, stale reports and recovered expiries per job name, until the next flush."""
        self._lock = threading.Lock()
        self._stuck: set[tuple[int, int]] = set()
        """Attempt tokens ``(job id, attempt)`` whose handler is stuck now (its thread still
        runs): one per thread, so two hung attempts of one job count twice."""

    def count(self, slot: Slot, outcome: Outcome, unknown: str = "", *, ran: bool = True) -> None:
        """Count an outcome in the summary and, unless the protocol wrote it, log its one line.

        ``unknown``: why this worker could not run the job (its name is not registered here);
        with ``RELEASED`` the job was deferred, and the console says so. ``ran``: False when
        shutdown handed the job back (its runtime is not a run's)."""
        job = slot.job
        if outcome in WORKER_LINES:
            logger.info(
                "job.%s id=%s name=%s attempt=%s queue=%s duration=%.3fs worker=%s",
                outcome.value,
                job.pk,
                job.name,
                job.attempt,
                job.queue,
                slot.duration,
                self.worker_id,
            )
        if self.console is not None:
            if outcome is Outcome.RELEASED and unknown:
                # Handed back to wait for a worker that knows the name: say so, and why.
                self.console.finished(job, outcome, slot.duration, unknown, deferred=True)
            else:
                self.console.finished(job, outcome, slot.duration, _error_of(slot))
        with self._lock:
            self.summary.count(outcome)
        lease = job.lease_seconds or self.lease
        self.runtimes.outcome(job.name, slot.duration, outcome, ran=ran, lease=lease)

    def claimed(self) -> None:
        with self._lock:
            self.summary.claimed += 1

    def timed_out(self) -> None:
        with self._lock:
            self.summary.timed_out += 1

    def stuck(self, token: tuple[int, int]) -> int:
        """The handler of attempt ``token`` is stuck: count it; returns how many handler
        threads are stuck now."""
        with self._lock:
            self.summary.stuck += 1
            self._stuck.add(token)
            return len(self._stuck)

    def unstuck(self, token: tuple[int, int]) -> int:
        """The stuck handler of attempt ``token`` returned at last; returns how many are
        stuck now."""
        with self._lock:
            self._stuck.discard(token)
            return len(self._stuck)

    @property
    def stuck_now(self) -> int:
        with self._lock:
            return len(self._stuck)

    def flush_runtimes(self) -> None:
        """Add the counts since the last flush to the per-hour rows; keep them on an error."""
        counts = self.runtimes.take()
        if not counts:
            return
        try:
            upkeep.record_runtimes(counts, heartbeat=self.heartbeat)
        except DatabaseError as exc:
            self.runtimes.put_back(counts)
            logger.warning(
                "worker.database_error id=%s where=runtime_stats error=%s",
                self.worker_id,
                headline(exc),
            )

    def count_recovered(self, recovered: protocol.Recovered) -> None:
        """Count the expiries lease recovery really took back (not those a heartbeat saved)."""
        names = [
            recovered.names[job_id]
            for job_id, outcome in recovered.items()
            if outcome is not Outcome.STALE and job_id in recovered.names
        ]
        self.runtimes.recovered(names)
