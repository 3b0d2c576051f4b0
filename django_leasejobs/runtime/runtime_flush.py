"""Flushing the worker's runtime counts (:mod:`.runtime_tally`) to the per-hour rows.

The heartbeat thread flushes after its renewal, so at most once per heartbeat interval, and the
worker once more when it stops. A flush that fails on a database error puts its counts back
for the next one: the rows only ever gain what was not yet written.
"""

from __future__ import annotations

import logging

from django.db import Error as DatabaseError

from .. import protocol, upkeep
from ..protocol import Outcome
from .worker_state import WorkerState, headline

logger = logging.getLogger("django_leasejobs")


class RuntimeFlush(WorkerState):
    def _flush_runtimes(self) -> None:
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

    def _count_recovered(self, recovered: protocol.Recovered) -> None:
        """Count the expiries lease recovery really took back (not those a heartbeat saved)."""
        names = [
            recovered.names[job_id]
            for job_id, outcome in recovered.items()
            if outcome is not Outcome.STALE and job_id in recovered.names
        ]
        self.runtimes.recovered(names)
