"""The table of live workers: each worker's heartbeat upserts its row, a clean stop deletes it.

Not a job state change, but a write every worker makes, so it lives beside them: one
statement per heartbeat beat (never per job; the dialect's ``upsert_worker``), times from the
database clock, values only as parameters. A worker killed with ``kill -9`` leaves its row:
readers call a row *lost* once it has not been seen for its worker's lease (its jobs' leases
have run out too), and :func:`prune_workers` deletes rows not seen for much longer.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

from django.db.models import QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from django.db.models.fields import DateTimeField

from ..db.dbtime import DbNow
from ..dialects import for_alias
from ..models import Worker
from ..protocol.base import job_database, logger

PRUNE_AFTER_LEASES = 10
"""A row not seen for this many of the pruning worker's leases is deleted by its maintenance."""


@dataclass(frozen=True)
class Beat:
    """What a worker says of itself at each heartbeat beat."""

    worker_id: str
    host: str
    pid: int
    queues: str
    """Comma-separated queue names, or ``*`` for every queue."""
    version: str
    concurrency: int
    async_concurrency: int
    lease_seconds: float
    running: int
    stuck: int


def _fitted(state: Beat) -> dict[str, object]:
    """The row's values, text cut to the columns' lengths (a long queue list is cut short)."""
    row = asdict(state)
    for name in ("host", "queues", "version"):
        limit = getattr(Worker._meta.get_field(name), "max_length", 0)
        text = str(row[name])
        row[name] = text if len(text) <= limit else text[: limit - 1] + "\u2026"
    return row


def beat(state: Beat) -> None:
    """Insert or refresh the worker's row in one statement; ``last_seen_at`` is now."""
    alias = job_database()
    for_alias(alias).upsert_worker(alias, _fitted(state))


def forget_worker(worker_id: str) -> bool:
    """Delete a worker's row at its clean stop; False when there was none."""
    deleted, _ = Worker.objects.using(job_database()).filter(worker_id=worker_id).delete()
    return bool(deleted)


def _unseen(older_than: dt.timedelta) -> QuerySet[Worker]:
    if not isinstance(older_than, dt.timedelta) or older_than <= dt.timedelta(0):
        raise ValueError(f"older_than must be a positive timedelta, not {older_than!r}.")
    cutoff = ExpressionWrapper(DbNow() - Value(older_than), output_field=DateTimeField())
    return Worker.objects.using(job_database()).filter(last_seen_at__lt=cutoff)


def count_lost_workers(older_than: dt.timedelta) -> int:
    """How many workers' rows were not seen for ``older_than`` (a dry run of pruning)."""
    return _unseen(older_than).count()


def prune_workers(older_than: dt.timedelta) -> int:
    """Delete the rows of workers not seen for ``older_than``; return how many went."""
    deleted, _ = _unseen(older_than).delete()
    if deleted:
        logger.info("worker.pruned count=%s older_than=%s", deleted, older_than)
    return deleted
