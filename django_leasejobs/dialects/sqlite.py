"""SQLite: one UPDATE ... RETURNING claims, under the database's single write lock."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connections

from ..db.dbtime import SQLITE_NOW
from ..models import Job, Limiter, Pause
from .base import Dialect

# A write that changes nothing, but takes the database's write lock at once: what a limited
# claim then reads (running jobs, rate buckets) cannot change before it commits.
_WRITE_LOCK = "UPDATE {table} SET started = started WHERE 0 = 1"

# SQLite has no row locks: the whole UPDATE takes the database's single write lock, so the
# subquery and the guarded update see one consistent state and two claimers cannot both win.
_CLAIM = f"""
UPDATE {{table}}
SET status = 'running',
    attempt = attempt + 1,
    lease_owner = %s,
    lease_expires_at = STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f000', 'NOW',
        '+' || COALESCE(lease_seconds, %s) || ' seconds'),
    started_at = {SQLITE_NOW}
WHERE id IN (
    SELECT id FROM {{table}}
    WHERE status IN ('pending', 'failed') AND run_at <= {SQLITE_NOW} {{queue_filter}}
      -- Pauses: the paused names are read once into a temporary index, then tested per row.
      AND queue NOT IN (SELECT p.name FROM {{pause}} AS p WHERE p.kind = 'queue')
      AND name NOT IN (SELECT p.name FROM {{pause}} AS p WHERE p.kind = 'job')
      AND concurrency_key IS NULL AND rate_key IS NULL
    ORDER BY priority DESC, run_at, id
    LIMIT %s
) AND status IN ('pending', 'failed')
RETURNING *
"""

# Is a job with limits due? Read from leasejobs_limited, which holds only waiting jobs with
# limits: the planner would rather read leasejobs_waiting's due range, every due job without
# limits included. A partial index is usable only by a statement that repeats its condition
# term for term, constants included (a bound parameter never matches), so the statuses are
# written as the index's condition writes them.
_LIMITED_DUE = f"""
SELECT EXISTS (
    SELECT 1 FROM {{table}} INDEXED BY leasejobs_limited
    WHERE status IN ('pending', 'failed')
      AND (concurrency_key IS NOT NULL OR rate_key IS NOT NULL)
      AND run_at <= {SQLITE_NOW} {{queue_filter}}
)
"""


def _queue_filter(queues: Sequence[str] | None) -> tuple[str, list[str]]:
    if queues is None:
        return "", []
    return f"AND queue IN ({', '.join(['%s'] * len(queues))})", list(queues)


class SQLiteDialect(Dialect):
    def claim(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
    ) -> list[Job]:
        table = connections[alias].ops.quote_name(Job._meta.db_table)
        queue_filter, queue_params = _queue_filter(queues)
        pause = connections[alias].ops.quote_name(Pause._meta.db_table)
        sql = _CLAIM.format(table=table, queue_filter=queue_filter, pause=pause)
        params = [worker_id, lease_seconds, *queue_params, batch]
        return list(Job.objects.using(alias).raw(sql, params))

    def _limited_due(self, alias: str, queues: Sequence[str] | None, batch: int) -> bool:
        # Any due job with limits, anywhere: leasejobs_limited holds only them.
        table = connections[alias].ops.quote_name(Job._meta.db_table)
        queue_filter, params = _queue_filter(queues)
        with connections[alias].cursor() as cursor:
            cursor.execute(_LIMITED_DUE.format(table=table, queue_filter=queue_filter), params)
            return bool(cursor.fetchone()[0])

    def _lock_limiters(self, alias: str, keys: Iterable[str]) -> set[str]:
        # No row locks: the database's write lock, taken by the first statement of the claim's
        # transaction, holds every key until it commits.
        connection = connections[alias]
        table = connection.ops.quote_name(Limiter._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(_WRITE_LOCK.format(table=table))
        return set(keys)
