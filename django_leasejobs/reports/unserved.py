"""Queues that hold due jobs while no worker serves them: the misconfiguration nothing reports.

A worker started with ``--queues a,b`` leaves every other queue's jobs waiting, without an
error anywhere. Two readers ask about it: a ``--burst`` worker names the due jobs it left in
queues it does not serve (:func:`left_behind`), and the health verdict names the queues no live
worker serves (:func:`unserved_queues`, from the rows of the table of live workers, which
``stats`` reads anyway: no query of its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .. import dialects
from ..db import dbtime
from ..models import IS_WAITING, Job
from ..models.databases import read_database
from .stats import QueueStats, WorkerStats

EVERY_QUEUE = "*"
"""A worker row's ``queues`` when it serves every queue."""

CUT = "\u2026"
"""The mark a worker row's ``queues`` ends with when the list was cut to the column."""

LISTED = 10
"""Most queues the ``--burst`` summary counts and names; the others are only counted as queues."""


def serves_every_queue(worker_queues: str) -> bool:
    """Whether a worker whose row says ``worker_queues`` (``a,b`` or ``*``) serves them all.

    A list cut to the column's length (it ends with ``…``) cannot say what it left out: such a
    worker is taken to serve every queue, so the verdict never blames a queue it may serve.
    """
    return worker_queues == EVERY_QUEUE or worker_queues.endswith(CUT)


def serves(worker_queues: str, queue: str) -> bool:
    """Whether a worker whose row says ``worker_queues`` serves ``queue``."""
    return serves_every_queue(worker_queues) or queue in worker_queues.split(",")


def unserved_queues(
    judged: Mapping[str, QueueStats], workers: Iterable[WorkerStats]
) -> dict[str, float]:
    """Each queue holding a due job while no live worker serves it -> its oldest due age.

    From numbers ``stats.collect`` read anyway (every queue's oldest due job, the workers'
    rows): no query, so the anonymous health verdict keeps its fixed cost. A lost worker (not
    seen for its lease) serves nothing; a paused queue has no due age, so it is never listed.
    """
    served: set[str] = set()
    for worker in workers:
        if worker.lost:
            continue
        if serves_every_queue(worker.queues):
            return {}
        served.update(worker.queues.split(","))
    return {
        name: numbers.oldest_due_age
        for name, numbers in judged.items()
        if numbers.oldest_due_age > 0 and name not in served
    }


def left_behind(
    served: Sequence[str] | None, using: str | None = None
) -> tuple[list[tuple[str, dialects.Count]], int]:
    """The queues this worker does not serve that hold due jobs, with their due jobs counted.

    One statement finds the queues holding due jobs (``dialects.oldest_due``, a skip scan: its
    cost follows the number of queues, not of jobs); then the first :data:`LISTED` of those
    not served are counted, each count capped (``dialects.count``). Returns those queues with
    their counts, in name order, and how many more were left out. ``served=None`` (every queue)
    leaves nothing behind and reads nothing.
    """
    if served is None:
        return [], 0
    alias = using or read_database()
    now = dbtime.db_now(alias)
    due = [
        queue
        for queue, oldest in dialects.oldest_due(alias, now).items()
        if oldest is not None and queue not in served
    ]
    waiting_rows = Job.objects.using(alias).filter(IS_WAITING, run_at__lte=now)
    counted = [(queue, dialects.count(waiting_rows.filter(queue=queue))) for queue in due[:LISTED]]
    return counted, max(0, len(due) - LISTED)
