"""PostgreSQL's statements for a claim of jobs with limits (``limited.LimitedClaims``).

The candidate reads take each queue's first rows from its index (the queues given, or found
by the loose index scan of ``postgresql.EVERY_QUEUE``) and keep the best: ordering the due
rows of every queue at once would sort the whole backlog on each claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections

from ..models import Job, Limiter, Pause
from .limited import Bucket, Candidate, Head, rate_lock
from .pauses import ROW_NOT_PAUSED

_CANDIDATES = """
WITH RECURSIVE queues(queue) AS ({queues}),
full_slots AS (
    -- (key, limit) for every limit a key's running jobs fill now: a job whose own limit is
    -- among them must wait. As pairs, so the test below is one hashed lookup per row; a hint
    -- only, the claim counts again under the key's lock.
    SELECT concurrency_key, generate_series(1, count(*)::int) AS full_limit FROM {table}
    WHERE status = 'running' AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
),
spent AS (SELECT name FROM {limiter} WHERE blocked_until > STATEMENT_TIMESTAMP())
SELECT c.* FROM queues AS q CROSS JOIN LATERAL (
    SELECT {fields} FROM {table} AS t
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
      AND queue = q.queue AND (concurrency_key IS NOT NULL OR rate_key IS NOT NULL)
      -- A full key's or spent bucket's backlog is left out here, so it cannot fill the
      -- read and hide the keys behind it.
      AND (concurrency_key IS NULL
           OR (concurrency_key, concurrency_limit) NOT IN (SELECT * FROM full_slots))
      AND (rate_key IS NULL OR rate_key NOT IN (SELECT * FROM spent))
      AND {t_not_paused}
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
    SELECT id, priority, run_at FROM {table} AS t
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
      AND queue = q.queue AND concurrency_key IS NULL AND rate_key IS NULL
      AND {t_not_paused}
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
  -- A pause that committed after the candidates were read still holds them back.
  AND {j_not_paused}
RETURNING {columns}
"""

GIVEN_QUEUES = "SELECT unnest(%s::text[])"

# The fast path's test: one probe of leasejobs_limited (empty when no job has limits).
LIMITED_DUE = """
SELECT EXISTS (
    SELECT FROM {table}
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
      AND (concurrency_key IS NOT NULL OR rate_key IS NOT NULL) {queue_filter}
)
"""

# A key already there is left alone without waiting, even while another claimer holds it.
ADD_LIMITERS = """
INSERT INTO {limiter} (key, name, started)
SELECT k, substr(k, 3), 0 FROM unnest(%s::text[]) AS k
ON CONFLICT (key) DO NOTHING
"""


def limited_due(alias: str, queues: Sequence[str] | None) -> bool:
    qn = connections[alias].ops.quote_name
    queue_filter, params = "", []
    if queues is not None:
        queue_filter, params = "AND queue = ANY(%s::text[])", [list(queues)]
    sql = LIMITED_DUE.format(table=qn(Job._meta.db_table), queue_filter=queue_filter)
    return bool(_run(alias, sql, params)[0][0])


# A transaction-level advisory lock per key, tried and never waited for: no row is written
# to take it (a row lock is a write on PostgreSQL), and it ends with the transaction. Keys
# are hashed to 64 bits; two keys sharing a hash only make one wait a round, never run over.
LOCK_LIMITERS = """
SELECT k FROM unnest(%s::text[]) AS k
WHERE pg_try_advisory_xact_lock(hashtextextended(k, 0))
"""


def lock_limiters(alias: str, keys: list[str]) -> set[str]:
    return {row[0] for row in _run(alias, LOCK_LIMITERS, [keys])}


def add_limiters(alias: str, keys: list[str]) -> None:
    qn = connections[alias].ops.quote_name
    _run_only(alias, ADD_LIMITERS.format(limiter=qn(Limiter._meta.db_table)), [keys])


# The keys as one array parameter: an IN list of a few hundred placeholders changes the
# statement's text with every claim, and the driver splits such a text again each time.
RUNNING_COUNTS = """
SELECT concurrency_key, count(*) FROM {table}
WHERE status = 'running' AND concurrency_key = ANY(%s::text[])
GROUP BY concurrency_key
"""


def running_counts(alias: str, keys: list[str]) -> dict[str, int]:
    table = connections[alias].ops.quote_name(Job._meta.db_table)
    return {str(k): int(n) for k, n in _run(alias, RUNNING_COUNTS.format(table=table), [keys])}


BUCKETS = """
SELECT name, window_start, started, STATEMENT_TIMESTAMP() FROM {limiter}
WHERE key = ANY(%s::text[])
"""


def buckets(alias: str, keys: list[str]) -> dict[str, Bucket]:
    limiter = connections[alias].ops.quote_name(Limiter._meta.db_table)
    rows = _run(alias, BUCKETS.format(limiter=limiter), [[rate_lock(key) for key in keys]])
    return {name: Bucket(start, started, now) for name, start, started, now in rows}


FILL_BUCKETS = """
UPDATE {limiter} AS l
SET window_start = f.window_start, started = f.started,
    blocked_until = CASE WHEN f.started >= f.rate_limit
                         THEN f.window_start + make_interval(secs => f.period) END
FROM unnest(%s::text[], %s::timestamptz[], %s::int[], %s::int[], %s::int[])
    AS f(key, window_start, started, rate_limit, period)
WHERE l.key = f.key
"""


def fill_buckets(alias: str, fills: dict[str, tuple[Any, int, int, int]]) -> None:
    qn = connections[alias].ops.quote_name
    names = sorted(fills)
    columns = [[fills[n][i] for n in names] for i in range(4)]
    params = [[rate_lock(n) for n in names], *columns]
    _run_only(alias, FILL_BUCKETS.format(limiter=qn(Limiter._meta.db_table)), params)


def _run_only(alias: str, sql: str, params: list[Any]) -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)


def _run(alias: str, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def not_paused_sql(alias: str, row: str) -> str:
    """``ROW_NOT_PAUSED`` for the job row aliased ``row`` (an identifier of this module)."""
    return ROW_NOT_PAUSED.format(
        pause=connections[alias].ops.quote_name(Pause._meta.db_table), row=row
    )


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
        t_not_paused=not_paused_sql(alias, "t"),
    )
    return [Candidate(*row) for row in _run(alias, sql, [*params, count, count])]


def heads(alias: str, queues: Sequence[str] | None, count: int, every_queue: str) -> list[Head]:
    qn = connections[alias].ops.quote_name
    source, params = _queues(queues, every_queue)
    sql = _HEADS.format(
        queues=source, table=qn(Job._meta.db_table), t_not_paused=not_paused_sql(alias, "t")
    )
    return [Head(*row) for row in _run(alias, sql, [*params, count, count])]
