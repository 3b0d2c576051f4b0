"""SQLite: one UPDATE ... RETURNING claims, under the database's single write lock.

Each statement is a module constant with named parameters (``%(name)s``, run with a dict:
Django's SQLite backend turns them into SQLite's own ``:name``), the app's tables named
literally and the fragments every database shares taken from ``dialects.sql``. The only text
that varies is the list of queues a claim is given (``sql.placeholders``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections

from ...db.dbtime import SQLITE_NOW
from ...models import Job
from ..base.dialect import Dialect
from ..sql import (
    CLAIM_ORDER,
    JOB,
    LIMITER,
    PAUSE,
    WAITING,
    WITH_LIMITS,
    WITHOUT_LIMITS,
    placeholders,
)

DUE = f"{WAITING} AND run_at <= {SQLITE_NOW}"
"""A waiting job whose time has come (the database's clock)."""

# A write that changes nothing, but takes the database's write lock at once: what a limited
# claim then reads (running jobs, rate buckets) cannot change before it commits.
_WRITE_LOCK = f"UPDATE {LIMITER} SET started = started WHERE 0 = 1"

# SQLite has no row locks: the whole UPDATE takes the database's single write lock, so the
# subquery and the guarded update see one consistent state and two claimers cannot both win.
# ``{queues}``: nothing (every queue) or ``AND queue IN (...)`` (``_for_queues``).
_CLAIM = f"""
UPDATE {JOB}
SET status = 'running',
    attempt = attempt + 1,
    lease_owner = %(worker_id)s,
    lease_expires_at = STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f000', 'NOW',
        '+' || COALESCE(lease_seconds, %(lease_seconds)s) || ' seconds'),
    started_at = {SQLITE_NOW}
WHERE id IN (
    SELECT id FROM {JOB}
    WHERE {DUE} {{queues}}
      -- Pauses: the paused names are read once into a temporary index, then tested per row.
      AND queue NOT IN (SELECT p.name FROM {PAUSE} AS p WHERE p.kind = 'queue')
      AND name NOT IN (SELECT p.name FROM {PAUSE} AS p WHERE p.kind = 'job')
      AND {WITHOUT_LIMITS}
    ORDER BY {CLAIM_ORDER}
    LIMIT %(batch)s
) AND {WAITING}
RETURNING *
"""

# Is a job with limits due? Read from leasejobs_limited, which holds only waiting jobs with
# limits: the planner would rather read leasejobs_waiting's due range, every due job without
# limits included. A partial index is usable only by a statement that repeats its condition
# term for term, constants included (a bound parameter never matches), so the statuses are
# written as the index's condition writes them.
_LIMITED_DUE = f"""
SELECT EXISTS (
    SELECT 1 FROM {JOB} INDEXED BY leasejobs_limited
    WHERE {WAITING}
      AND {WITH_LIMITS}
      AND run_at <= {SQLITE_NOW} {{queues}}
)
"""


def _for_queues(statement: str, queues: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
    """``statement`` for every queue (None) or for the given ones, and their parameters."""
    if queues is None:
        return statement.format(queues=""), {}
    names, params = placeholders("queue", queues)
    return statement.format(queues=f"AND queue IN ({names})"), params


class SQLiteDialect(Dialect):
    journal_mode_query = "PRAGMA journal_mode"  # WAL, or the worker's writes block readers

    def _claim(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
    ) -> list[Job]:
        sql, params = _for_queues(_CLAIM, queues)
        params.update(worker_id=worker_id, lease_seconds=lease_seconds, batch=batch)
        return list(Job.objects.using(alias).raw(sql, params))

    def _limited_due(self, alias: str, queues: Sequence[str] | None, batch: int) -> bool:
        # Any due job with limits, anywhere: leasejobs_limited holds only them.
        sql, params = _for_queues(_LIMITED_DUE, queues)
        with connections[alias].cursor() as cursor:
            cursor.execute(sql, params)
            return bool(cursor.fetchone()[0])

    def _lock_limiters(self, alias: str, keys: Iterable[str]) -> set[str]:
        # No row locks: the database's write lock, taken by the first statement of the claim's
        # transaction, holds every key until it commits.
        with connections[alias].cursor() as cursor:
            cursor.execute(_WRITE_LOCK)
        return set(keys)
