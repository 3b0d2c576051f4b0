"""The library's hot path with no worker around it: claim a batch, run each job, complete them.

It is what a worker does at best, in one thread, through ``protocol`` and ``execution`` only,
so its figure separates the cost of the protocol (SQL, ORM, Python per job) from the cost of a
worker's threads, heartbeats and bookkeeping.
"""

from __future__ import annotations

from django_leasejobs import protocol
from django_leasejobs.runtime import attempt_ends, execution
from django_leasejobs.runtime.connection_keeper import ConnectionKeeper


def run_loop(batch: int, *, worker_id: str, queues: list[str] | None = None) -> int:
    """Drain what is due; return how many jobs this process ran.

    Its connection follows the worker's rules (kept between jobs whatever ``CONN_MAX_AGE``
    says), as the worker's own threads do.
    """
    ConnectionKeeper().adopt()
    done = 0
    queues = queues or ["default"]
    while True:
        claimed = protocol.claim(worker_id, queues=queues, batch=batch)
        if not claimed:
            return done
        succeeded = []
        for job in claimed:
            result = execution.execute(job, worker_id)
            if result.ok and result.result is None:
                succeeded.append((job.pk, job.attempt))
            else:
                attempt_ends.write_result(result)
        protocol.complete_many(succeeded)
        done += len(claimed)
