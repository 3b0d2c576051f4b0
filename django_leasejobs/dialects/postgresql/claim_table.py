"""The table a claim reads: the job table's live partition itself, where the table is partitioned.

Django sends each statement unprepared (so that transaction-pooling PgBouncers keep working),
so PostgreSQL plans every claim afresh, and a statement over the partitioned parent costs about
twice the planning of the same statement over its live partition: the parent is expanded and
pruned for each of its references before the partition's indexes are weighed
(docs/benchmarks.md). Waiting and running rows are always in the live partition (``in_history``
is false until a final state), so the claims (with limits or without, and their probe for
jobs with limits), which read waiting and running rows and make waiting ones running, name it;
the writes that end a job name the parent, which moves the row to the history.

Which table is read from the catalog once per database alias and kept. Migration 0026's steps
forget it (``forget``); a process that kept the partition after another one undid 0026 finds it
gone on its next claim, forgets it, and claims again from the table (outside a transaction; in
one, the error stands and the next claim reads the table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import ProgrammingError, connections

from .sql import JOB, LIVE

UNDEFINED_TABLE = "42P01"
"""PostgreSQL's SQLSTATE for a table that does not exist (read without importing psycopg:
this module loads with the dialects, on projects that have no PostgreSQL driver)."""

TABLES = (JOB, LIVE)

T = TypeVar("T")

_chosen: dict[str, str] = {}


def table(alias: str) -> str:
    """What the claims of ``alias`` read: ``LIVE`` if the job table is partitioned, else ``JOB``."""
    chosen = _chosen.get(alias)
    if chosen is None:
        from .history import is_partitioned  # psycopg's: a PostgreSQL connection is at hand

        with connections[alias].cursor() as cursor:
            chosen = _chosen[alias] = LIVE if is_partitioned(cursor) else JOB
    return chosen


def forget(alias: str | None = None) -> None:
    """Read the table's layout again before the next claim (of ``alias``, or every alias)."""
    if alias is None:
        _chosen.clear()
    else:
        _chosen.pop(alias, None)


def read(alias: str, run: Callable[[str], T]) -> T:
    """``run(table)`` with the table the claims of ``alias`` read; once more with the job table
    if the live partition it was given is gone and no transaction is open."""
    chosen = table(alias)
    try:
        return run(chosen)
    except ProgrammingError as exc:
        if chosen != LIVE or getattr(exc.__cause__, "sqlstate", None) != UNDEFINED_TABLE:
            raise
        forget(alias)
        if connections[alias].in_atomic_block:
            raise
    return run(table(alias))
