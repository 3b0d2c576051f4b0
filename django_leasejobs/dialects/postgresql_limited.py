"""PostgreSQL's statements for a claim of jobs with limits (``PostgreSQLDialect.claim_limited``).

A limited claim here is four statements in its transaction: ``HOLD`` (read the candidates,
lock their keys, read the heads of the jobs without limits), ``LIMITER_STATE`` (running counts
and buckets, read after the locks), ``TAKE`` and, with rate keys, ``FILL_BUCKETS``. The
candidate reads take each queue's first rows from its index (the queues given, or found by the
loose index scan of ``postgresql.EVERY_QUEUE``) and keep the best: ordering the due rows of
every queue at once would sort the whole backlog on each claim.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections, transaction

from ..models import Job, Limiter, Pause
from .limiter_pruning import prunable
from .pauses import ROW_NOT_PAUSED
from .within_limits import Bucket, Candidate, Fill, Head, Held, limiter_keys

_LIMITED_ROWS = """
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
"""

_HEAD_ROWS = """
    SELECT id, priority, run_at FROM {table} AS t
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
      AND queue = q.queue AND concurrency_key IS NULL AND rate_key IS NULL
      AND {t_not_paused}
    ORDER BY priority DESC, run_at, id
    LIMIT %s
"""

HOLD = """
WITH RECURSIVE queues(queue) AS ({queues}),
head_queues(queue) AS ({head_queues}),
full_slots AS (
    -- (key, limit) for every limit a key's running jobs fill now: a job whose own limit is
    -- among them must wait. As pairs, so the test below is one hashed lookup per row; a hint
    -- only, the claim counts again under the key's lock.
    SELECT concurrency_key, generate_series(1, count(*)::int) AS full_limit FROM {table}
    WHERE status = 'running' AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
),
spent AS (SELECT name FROM {limiter} WHERE blocked_until > STATEMENT_TIMESTAMP()),
candidates AS MATERIALIZED (
    SELECT c.*, row_number() OVER (
        PARTITION BY c.concurrency_key ORDER BY c.priority DESC, c.run_at, c.id
    ) AS nth_of_key
    FROM queues AS q CROSS JOIN LATERAL ({limited_rows}) AS c
    WHERE q.queue IS NOT NULL
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT %s
),
held AS (
    -- The candidates in claim order (as the materialized rows come) until ``batch`` of them
    -- are held: a key another claimer holds is passed over and the next candidate tried, so
    -- claimers reading at once spread over the keys instead of the first taking them all;
    -- a candidate its key's earlier ones already fill takes no lock. CASE fixes the order.
    SELECT * FROM candidates
    WHERE CASE
        WHEN concurrency_key IS NOT NULL AND nth_of_key > concurrency_limit THEN false
        WHEN concurrency_key IS NOT NULL
             AND NOT pg_try_advisory_xact_lock(hashtextextended('c:' || concurrency_key, 0))
             THEN false
        WHEN rate_key IS NOT NULL
             THEN pg_try_advisory_xact_lock(hashtextextended('r:' || rate_key, 0))
        ELSE true
    END
    LIMIT %s
),
heads AS (
    SELECT c.* FROM head_queues AS q CROSS JOIN LATERAL ({head_rows}) AS c
    WHERE q.queue IS NOT NULL
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT %s
)
SELECT true, {fields} FROM held
UNION ALL
SELECT false, {head_fields} FROM heads
"""
"""Candidates (a hint: read before the locks), their keys locked, and the heads of the jobs
without limits, in one statement at the start of the claim's transaction. The locks are
transaction-level advisory locks, tried and never waited for: no row is written to take one
(a row lock is a write on PostgreSQL); keys are hashed to 64 bits, and two keys sharing a hash
only make one wait a round, never run over. ``limiter_pruning`` takes the same locks."""

# A head's row has the candidate's columns, NULL for those a head lacks.
_HEAD_FIELDS = ", ".join([*Head._fields, *["NULL"] * (len(Candidate._fields) - len(Head._fields))])

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

# The fast path's test: is a job with limits due in any of the queues? Each queue is read in
# the order of leasejobs_limited, as the claim reads it. A bare EXISTS over the table let the
# planner pick a sequential scan whenever most rows have limits (it expects a match early),
# and that scan read past every claimed and finished row on each claim, so a drain slowed as
# it went.
LIMITED_DUE = """
WITH RECURSIVE queues(queue) AS ({queues})
SELECT EXISTS (
    SELECT FROM queues AS q CROSS JOIN LATERAL (
        SELECT FROM {table}
        WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
          AND queue = q.queue AND (concurrency_key IS NOT NULL OR rate_key IS NOT NULL)
        ORDER BY priority DESC, run_at, id
        LIMIT 1
    ) AS c
    WHERE q.queue IS NOT NULL
)
"""


def limited_due(
    alias: str, queues: Sequence[str] | None, every_queue: Callable[[bool, str], str]
) -> bool:
    """``every_queue`` as for ``hold``."""
    if queues is None:
        source, params = every_queue(True, "queues"), []
    else:
        source, params = GIVEN_QUEUES, [list(queues)]
    table = connections[alias].ops.quote_name(Job._meta.db_table)
    return bool(_run(alias, LIMITED_DUE.format(queues=source, table=table), params)[0][0])


# The keys as array parameters: an IN list of a few hundred placeholders changes the
# statement's text with every claim, and the driver splits such a text again each time.
LIMITER_STATE = """
SELECT 'c', concurrency_key, count(*)::int, NULL::timestamptz, STATEMENT_TIMESTAMP() FROM {table}
WHERE status = 'running' AND concurrency_key = ANY(%s::text[])
GROUP BY concurrency_key
UNION ALL
-- A rate key with no row yet has started nothing: its row is written by fill_buckets.
SELECT 'r', k, COALESCE(l.started, 0), l.window_start, STATEMENT_TIMESTAMP()
FROM unnest(%s::text[]) AS k LEFT JOIN {limiter} AS l ON l.key = 'r:' || k
"""


def limiter_state(
    alias: str, concurrency_keys: list[str], rate_keys: list[str]
) -> tuple[dict[str, int], dict[str, Bucket]]:
    qn = connections[alias].ops.quote_name
    sql = LIMITER_STATE.format(table=qn(Job._meta.db_table), limiter=qn(Limiter._meta.db_table))
    running: dict[str, int] = {}
    buckets: dict[str, Bucket] = {}
    for kind, key, number, start, now in _run(alias, sql, [concurrency_keys, rate_keys]):
        if kind == "c":
            running[key] = number
        else:
            buckets[key] = Bucket(start, number, now)
    return running, buckets


# An upsert: the claim holds the key's lock, so no one else writes the row meanwhile.
FILL_BUCKETS = """
INSERT INTO {limiter} AS l (key, name, window_start, started, blocked_until)
SELECT 'r:' || f.name, f.name, f.window_start, f.started,
       CASE WHEN f.started >= f.rate_limit
            THEN f.window_start + make_interval(secs => f.period) END
FROM unnest(%s::text[], %s::timestamptz[], %s::int[], %s::int[], %s::int[])
    AS f(name, window_start, started, rate_limit, period)
ON CONFLICT (key) DO UPDATE
SET window_start = EXCLUDED.window_start, started = EXCLUDED.started,
    blocked_until = EXCLUDED.blocked_until
"""


def fill_buckets(alias: str, fills: dict[str, Fill]) -> None:
    qn = connections[alias].ops.quote_name
    names = sorted(fills)
    columns = [[fills[n][i] for n in names] for i in range(4)]
    params = [names, *columns]
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


def hold(
    alias: str,
    queues: Sequence[str] | None,
    count: int,
    batch: int,
    every_queue: Callable[[bool, str], str],
) -> Held:
    """``every_queue(limited, cte)``: the loose index scan of the queues that have due jobs
    with limits (or without), as the recursive CTE named ``cte``."""
    qn = connections[alias].ops.quote_name
    table, t_not_paused = qn(Job._meta.db_table), not_paused_sql(alias, "t")
    if queues is None:
        sources, params = (every_queue(True, "queues"), every_queue(False, "head_queues")), []
    else:
        sources, params = (GIVEN_QUEUES, GIVEN_QUEUES), [list(queues), list(queues)]
    fields = ", ".join(Candidate._fields)
    sql = HOLD.format(
        queues=sources[0],
        head_queues=sources[1],
        table=table,
        limiter=qn(Limiter._meta.db_table),
        fields=fields,
        # A head's row has the candidate's columns, those it lacks NULL.
        head_fields=_HEAD_FIELDS,
        limited_rows=_LIMITED_ROWS.format(fields=fields, table=table, t_not_paused=t_not_paused),
        head_rows=_HEAD_ROWS.format(table=table, t_not_paused=t_not_paused),
    )
    candidates: list[Candidate] = []
    heads: list[Head] = []
    for limited, *row in _run(alias, sql, [*params, count, count, batch, batch, batch]):
        if limited:
            candidates.append(Candidate(*row))
        else:
            heads.append(Head(*row[:3]))
    return Held(candidates, heads, set(limiter_keys(candidates)))


# The lock claimers take (HOLD): the same function of the same text, the limiter row's key.
LOCK_KEYS = """
SELECT k, pg_try_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(%s::text[]) AS k
"""


def prune_limiters(
    alias: str, older_than: dt.timedelta, batch: int, after_key: str
) -> tuple[int, str]:
    """Claimers lock keys with advisory locks, not rows: take the key's lock, then delete."""
    with transaction.atomic(using=alias):
        chosen = prunable(alias, older_than).filter(key__gt=after_key).order_by("key")
        keys = list(chosen.values_list("key", flat=True)[:batch])
        if not keys:
            return 0, after_key
        locked = [key for key, got in _run(alias, LOCK_KEYS, [keys]) if got]
        deleted = 0
        if locked:
            deleted, _ = prunable(alias, older_than).filter(key__in=locked).delete()
    return deleted, keys[-1]
