"""PostgreSQL's statements for a claim of jobs with limits (``limited.LimitedClaims``).

The candidate reads take each queue's first rows from its index (the queues given, or found
by the loose index scan of ``postgresql.EVERY_QUEUE``) and keep the best: ordering the due
rows of every queue at once would sort the whole backlog on each claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections

from ..models import Job, Limiter
from .limited import Candidate, Head

_CANDIDATES = """
WITH RECURSIVE queues(queue) AS ({queues}),
full_keys AS (
    -- Keys at their limit now (a hint: the claim counts again under the key's lock).
    SELECT concurrency_key FROM {table}
    WHERE status = 'running' AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key HAVING count(*) >= min(concurrency_limit)
),
spent AS (SELECT name FROM {limiter} WHERE blocked_until > STATEMENT_TIMESTAMP())
SELECT c.* FROM queues AS q CROSS JOIN LATERAL (
    SELECT {fields} FROM {table}
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
      AND queue = q.queue AND (concurrency_key IS NOT NULL OR rate_key IS NOT NULL)
      -- A full key's or spent bucket's backlog is left out here, so it cannot fill the
      -- read and hide the keys behind it.
      AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT * FROM full_keys))
      AND (rate_key IS NULL OR rate_key NOT IN (SELECT * FROM spent))
    ORDER BY priority DESC, run_at, id
    LIMIT %s
) AS c
WHERE q.queue IS NOT NULL
ORDER BY c.priority DESC, c.run_at, c.id
LIMIT %s
"""

_HEADS = """
WITH RECURSIVE queues(queue) AS ({queues})
SELECT c.* FROM queues AS q CROSS JOIN LATERAL (
    SELECT id, priority, run_at FROM {table}
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
      AND queue = q.queue AND concurrency_key IS NULL AND rate_key IS NULL
    ORDER BY priority DESC, run_at, id
    LIMIT %s
) AS c
WHERE q.queue IS NOT NULL
ORDER BY c.priority DESC, c.run_at, c.id
LIMIT %s
"""

TAKE = """
UPDATE {table} AS j
SET status = 'running',
    attempt = j.attempt + 1,
    lease_owner = %s,
    lease_expires_at = STATEMENT_TIMESTAMP()
        + make_interval(secs => COALESCE(j.lease_seconds, %s)),
    started_at = STATEMENT_TIMESTAMP()
-- The compare-and-set: still waiting and due (the candidates were read before the locks).
WHERE j.id = ANY(%s::bigint[]) AND j.status IN ('pending', 'failed')
  AND j.run_at <= STATEMENT_TIMESTAMP()
RETURNING {columns}
"""

GIVEN_QUEUES = "SELECT unnest(%s::text[])"


def _run(alias: str, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _queues(queues: Sequence[str] | None, every_queue: str) -> tuple[str, list[Any]]:
    if queues is None:
        return every_queue, []
    return GIVEN_QUEUES, [list(queues)]


def candidates(
    alias: str, queues: Sequence[str] | None, count: int, every_queue: str
) -> list[Candidate]:
    qn = connections[alias].ops.quote_name
    source, params = _queues(queues, every_queue)
    sql = _CANDIDATES.format(
        queues=source,
        table=qn(Job._meta.db_table),
        limiter=qn(Limiter._meta.db_table),
        fields=", ".join(Candidate._fields),
    )
    return [Candidate(*row) for row in _run(alias, sql, [*params, count, count])]


def heads(alias: str, queues: Sequence[str] | None, count: int, every_queue: str) -> list[Head]:
    qn = connections[alias].ops.quote_name
    source, params = _queues(queues, every_queue)
    sql = _HEADS.format(queues=source, table=qn(Job._meta.db_table))
    return [Head(*row) for row in _run(alias, sql, [*params, count, count])]
