"""Where finished jobs are kept apart from live ones: PostgreSQL's history partitions.

The other databases keep one table (retention deletes finished rows in batches); on them each
function here does nothing. PostgreSQL's layout and its statements are
``postgresql/history.py``, imported only for a PostgreSQL connection (it needs psycopg).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..core.conf import settings

if TYPE_CHECKING:
    from .postgresql.history import Partition

FINAL_STATES = ("succeeded", "dead", "cancelled")
MINUTE = dt.timedelta(minutes=1)
LOCK_TIMEOUT = "SET LOCAL lock_timeout = '500ms'"
"""An attach or a drop waits at most this for its locks, then gives up until the next try:
under PostgreSQL's ``deadlock_timeout`` (1 s), so a read of the whole table that waits behind
one is never chosen as a deadlock's victim."""


def history_spans() -> dict[str, dt.timedelta]:
    """Each final state's partition span: ``LEASEJOBS_HISTORY_PARTITION``, else a quarter of
    its retention age in whole minutes (one at least), so a state keeps about six partitions
    whatever its age. A state retention keeps for ever has none: nothing would be dropped,
    and each partition costs every look-up that cannot tell which one holds its row (by id,
    say) a few tenths of a millisecond of planning (docs/benchmarks.md)."""
    chosen = settings.HISTORY_PARTITION
    return {
        state: chosen or max(MINUTE, (age / 4) // MINUTE * MINUTE)
        for state, age in settings.RETENTION.items()
        if state in FINAL_STATES
    }


def _partitioned(connection: BaseDatabaseWrapper) -> bool:
    if connection.vendor != "postgresql":
        return False
    from .postgresql import history

    with connection.cursor() as cursor:
        return history.is_partitioned(cursor)


def partitioned(alias: str) -> bool:
    """Whether the job table of ``alias`` keeps its finished jobs in partitions."""
    return _partitioned(connections[alias])


def _now(cursor: object) -> dt.datetime:
    cursor.execute("SELECT STATEMENT_TIMESTAMP()")  # type: ignore[attr-defined]
    moment: dt.datetime = cursor.fetchone()[0]  # type: ignore[attr-defined]
    return moment


def history_migration(connection: BaseDatabaseWrapper, step: str) -> None:
    """Migration 0026's steps on PostgreSQL (``"check"``, then ``"partition"``; reversed,
    ``"unpartition"``), each doing nothing when already done; nothing on another database."""
    if connection.vendor != "postgresql":
        return
    from .postgresql import claim_table, history

    claim_table.forget()
    with connection.cursor() as cursor:
        if step == "check":
            if not history.is_partitioned(cursor):
                history.check_live_rows(cursor)
        elif step == "unpartition":
            if history.is_partitioned(cursor):
                history.unpartition_job_table(cursor)
        elif not history.is_partitioned(cursor):
            history.partition_job_table(cursor, _now(cursor), history_spans())


def make_partitions(alias: str) -> list[str]:
    """Make the history partitions due from now to a little ahead (each state's span:
    ``history_spans``); return their names. Nothing on a database without them."""
    if not partitioned(alias):
        return []
    from .postgresql import history

    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        cursor.execute(LOCK_TIMEOUT)
        return history.make_ahead(cursor, _now(cursor), history_spans())


def make_partitions_since(alias: str, since: dt.datetime) -> list[str]:
    """Make the history partitions back to the span that holds ``since``, for older finished
    rows moved in; return their names. Nothing on a database without them."""
    if not partitioned(alias):
        return []
    from .postgresql import history

    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        return history.make_since(cursor, since, _now(cursor), history_spans())


def history_partitions(alias: str, state: str) -> list[Partition]:
    """A final state's range partitions, oldest first (none on a database without them)."""
    if not partitioned(alias):
        return []
    from .postgresql import history

    with connections[alias].cursor() as cursor:
        return history.partitions(cursor, state)


def drop_partition(alias: str, state: str, partition: Partition, kept: Sequence[int]) -> bool:
    """Drop one history partition, writing ``kept`` rows back (into the state's DEFAULT
    partition), in one transaction whose locks wait at most ``LOCK_TIMEOUT``: False when it
    could not get them, or lost a deadlock (try again later)."""
    from .postgresql import history

    connection = connections[alias]
    try:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute(LOCK_TIMEOUT)
            history.detach_and_drop(cursor, state, partition, kept)
    except Exception as exc:
        # lock_not_available (the lock timeout), or a deadlock's victim: try again later.
        if getattr(exc.__cause__ or exc, "sqlstate", None) in ("55P03", "40P01"):
            return False
        raise
    return True
