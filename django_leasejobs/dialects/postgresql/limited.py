"""PostgreSQL's statements for a claim of jobs with limits (``PostgreSQLDialect.claim_limited``).

A limited claim here is four statements in its transaction: ``HOLD`` (read the candidates,
lock their keys, read the heads of the jobs without limits), ``LIMITER_STATE`` (running counts
and buckets, read after the locks), ``TAKE`` and, with rate keys, ``FILL_BUCKETS``. The
candidate reads take each queue's first rows from its index (the queues given, or found by a
loose index scan, ``sql.queue_scan``) and keep the best: ordering the due rows of
every queue at once would sort the whole backlog on each claim. Each statement that reads
queues comes in two variants, ``..._IN_QUEUES`` (the ``queues`` parameter) and
``..._EVERY_QUEUE``; every value is a named parameter. Those that read or lease the job table's
rows come written for the table and for its live partition, which a claim names where the
table is partitioned (``claim_table``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.db import connections, transaction

from ..base.limiter_pruning import prunable
from ..base.within_limits import Bucket, Candidate, Fill, Head, Held, limiter_keys
from . import claim_table
from .claim_table import TABLES
from .sql import (
    ATTEMPT_START,
    CLAIM_ORDER,
    CLAIMED_COLUMNS,
    CONCURRENCY_LOCK,
    DUE,
    GIVEN_QUEUES,
    LIMITER,
    RATE_LOCK,
    WITH_LIMITS,
    WITHOUT_LIMITS,
    not_paused,
    queue_scan,
    try_lock,
)

_CANDIDATE_FIELDS = ", ".join(Candidate._fields)

# A head's row has the candidate's columns, NULL for those a head lacks.
_HEAD_FIELDS = ", ".join([*Head._fields, *["NULL"] * (len(Candidate._fields) - len(Head._fields))])


def _limited_rows(table: str) -> str:
    return f"""
    SELECT {_CANDIDATE_FIELDS} FROM {table} AS t
    WHERE {DUE} AND queue = q.queue AND {WITH_LIMITS}
      -- A full key's or spent bucket's backlog is left out here, so it cannot fill the
      -- read and hide the keys behind it.
      AND (concurrency_key IS NULL
           OR (concurrency_key, concurrency_limit) NOT IN (SELECT * FROM full_slots))
      AND (rate_key IS NULL OR rate_key NOT IN (SELECT * FROM spent))
      AND {not_paused("t")}
    ORDER BY {CLAIM_ORDER}
    LIMIT %(count)s
"""


def _head_rows(table: str) -> str:
    return f"""
    SELECT id, priority, run_at FROM {table} AS t
    WHERE {DUE} AND queue = q.queue AND {WITHOUT_LIMITS} AND {not_paused("t")}
    ORDER BY {CLAIM_ORDER}
    LIMIT %(batch)s
"""


def _hold(queues: str, head_queues: str, table: str) -> str:
    return f"""
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
spent AS (SELECT name FROM {LIMITER} WHERE blocked_until > STATEMENT_TIMESTAMP()),
candidates AS MATERIALIZED (
    SELECT c.*, row_number() OVER (
        PARTITION BY c.concurrency_key, c.concurrency_limit ORDER BY {CLAIM_ORDER}
    ) AS nth_of_key
    FROM queues AS q CROSS JOIN LATERAL ({_limited_rows(table)}) AS c
    WHERE q.queue IS NOT NULL
    ORDER BY {CLAIM_ORDER}
    LIMIT %(count)s
),
held AS (
    -- The candidates in claim order (as the materialized rows come) until ``batch`` of them
    -- are held: a key another claimer holds is passed over and the next candidate tried, so
    -- claimers reading at once spread over the keys instead of the first taking them all;
    -- a candidate its key's earlier ones of the same limit already fill takes no lock (ranked
    -- per key *and* limit: an earlier job whose stricter limit holds it back leaves room for
    -- a looser one behind it). CASE fixes the order.
    SELECT * FROM candidates
    WHERE CASE
        WHEN concurrency_key IS NOT NULL AND nth_of_key > concurrency_limit THEN false
        WHEN concurrency_key IS NOT NULL AND NOT {try_lock(CONCURRENCY_LOCK)} THEN false
        WHEN rate_key IS NOT NULL THEN {try_lock(RATE_LOCK)}
        ELSE true
    END
    LIMIT %(batch)s
),
heads AS (
    SELECT c.* FROM head_queues AS q CROSS JOIN LATERAL ({_head_rows(table)}) AS c
    WHERE q.queue IS NOT NULL
    ORDER BY {CLAIM_ORDER}
    LIMIT %(batch)s
)
SELECT true, {_CANDIDATE_FIELDS} FROM held
UNION ALL
SELECT false, {_HEAD_FIELDS} FROM heads
"""


HOLD_IN_QUEUES = {table: _hold(GIVEN_QUEUES, GIVEN_QUEUES, table) for table in TABLES}
HOLD_EVERY_QUEUE = {
    table: _hold(
        queue_scan(WITH_LIMITS, "queues", table),
        queue_scan(WITHOUT_LIMITS, "head_queues", table),
        table,
    )
    for table in TABLES
}
"""Candidates (a hint: read before the locks), their keys locked, and the heads of the jobs
without limits, in one statement at the start of the claim's transaction. The locks are
transaction-level advisory locks (``sql.try_lock``), tried and never waited for: no
row is written to take one (a row lock is a write on PostgreSQL). Parameters: ``count``
(candidates to read), ``batch``, and ``queues`` for ``HOLD_IN_QUEUES``."""


def _take(table: str) -> str:
    return f"""
UPDATE {table} AS j
SET {ATTEMPT_START}
-- The compare-and-set: still waiting and due (the candidates were read before the locks).
WHERE id = ANY(%(ids)s::bigint[]) AND {DUE}
  -- A pause that committed after the candidates were read still holds them back.
  AND {not_paused("j")}
RETURNING {CLAIMED_COLUMNS}
"""


TAKE = {table: _take(table) for table in TABLES}
"""The lease of the candidates held, by the table the claim reads (``claim_table``)."""


# The fast path's test: is a job with limits due in any of the queues? Each queue is read in
# the order of leasejobs_limited, as the claim reads it. A bare EXISTS over the table let the
# planner pick a sequential scan whenever most rows have limits (it expects a match early),
# and that scan read past every claimed and finished row on each claim, so a drain slowed as
# it went.
def _limited_due(queues: str, table: str) -> str:
    return f"""
WITH RECURSIVE queues(queue) AS ({queues})
SELECT EXISTS (
    SELECT FROM queues AS q CROSS JOIN LATERAL (
        SELECT FROM {table}
        WHERE {DUE} AND queue = q.queue AND {WITH_LIMITS}
        ORDER BY {CLAIM_ORDER}
        LIMIT 1
    ) AS c
    WHERE q.queue IS NOT NULL
)
"""


LIMITED_DUE_IN_QUEUES = {table: _limited_due(GIVEN_QUEUES, table) for table in TABLES}
LIMITED_DUE_EVERY_QUEUE = {
    table: _limited_due(queue_scan(WITH_LIMITS, "queues", table), table) for table in TABLES
}
"""Each claim's first statement, by the table it reads (``claim_table``)."""


# The keys as array parameters: an IN list of a few hundred placeholders changes the
# statement's text with every claim, and the driver splits such a text again each time.
def _limiter_state(table: str) -> str:
    return f"""
SELECT 'c', concurrency_key, count(*)::int, NULL::timestamptz, STATEMENT_TIMESTAMP() FROM {table}
WHERE status = 'running' AND concurrency_key = ANY(%(concurrency_keys)s::text[])
GROUP BY concurrency_key
UNION ALL
-- A rate key with no row yet has started nothing: its row is written by FILL_BUCKETS.
SELECT 'r', rate_key, COALESCE(l.started, 0), l.window_start, STATEMENT_TIMESTAMP()
FROM unnest(%(rate_keys)s::text[]) AS rate_key LEFT JOIN {LIMITER} AS l ON l.key = {RATE_LOCK}
"""


LIMITER_STATE = {table: _limiter_state(table) for table in TABLES}
"""The running jobs of the keys (running rows are live ones) and the buckets' rows."""

# An upsert: the claim holds the key's lock, so no one else writes the row meanwhile.
FILL_BUCKETS = f"""
INSERT INTO {LIMITER} AS l (key, name, window_start, started, blocked_until)
SELECT {RATE_LOCK}, rate_key, f.window_start, f.started,
       CASE WHEN f.started >= f.rate_limit
            THEN f.window_start + make_interval(secs => f.period) END
FROM unnest(
    %(rate_keys)s::text[], %(window_starts)s::timestamptz[], %(started)s::int[],
    %(limits)s::int[], %(periods)s::int[]
) AS f(rate_key, window_start, started, rate_limit, period)
ON CONFLICT (key) DO UPDATE
SET window_start = EXCLUDED.window_start, started = EXCLUDED.started,
    blocked_until = EXCLUDED.blocked_until
"""

LOCK_KEYS = f"SELECT key, {try_lock('key')} FROM unnest(%(keys)s::text[]) AS key"
"""Limiter pruning takes the lock claimers take (``HOLD``) of each key it would delete."""


def _run(alias: str, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


def limited_due(alias: str, queues: Sequence[str] | None) -> bool:
    """Whether a job with limits is due in ``queues`` (every queue: None)."""
    params: dict[str, Any] = {}
    statements = LIMITED_DUE_EVERY_QUEUE
    if queues is not None:
        params["queues"], statements = list(queues), LIMITED_DUE_IN_QUEUES
    rows = claim_table.read(alias, lambda table: _run(alias, statements[table], params))
    return bool(rows[0][0])


def hold(alias: str, queues: Sequence[str] | None, count: int, batch: int) -> Held:
    """Run ``HOLD``: the candidates whose keys it locked, and the heads."""
    params: dict[str, Any] = {"count": count, "batch": batch}
    statements = HOLD_EVERY_QUEUE
    if queues is not None:
        params["queues"], statements = list(queues), HOLD_IN_QUEUES
    candidates: list[Candidate] = []
    heads: list[Head] = []
    rows = claim_table.read(alias, lambda table: _run(alias, statements[table], params))
    for limited, *row in rows:
        if limited:
            candidates.append(Candidate(*row))
        else:
            heads.append(Head(*row[:3]))
    return Held(candidates, heads, set(limiter_keys(candidates)))


def limiter_state(
    alias: str, concurrency_keys: list[str], rate_keys: list[str]
) -> tuple[dict[str, int], dict[str, Bucket]]:
    params = {"concurrency_keys": concurrency_keys, "rate_keys": rate_keys}
    running: dict[str, int] = {}
    buckets: dict[str, Bucket] = {}
    rows = claim_table.read(alias, lambda table: _run(alias, LIMITER_STATE[table], params))
    for kind, key, number, start, now in rows:
        if kind == "c":
            running[key] = number
        else:
            buckets[key] = Bucket(start, number, now)
    return running, buckets


def fill_buckets(alias: str, fills: dict[str, Fill]) -> None:
    keys = sorted(fills)
    starts, started, limits, periods = ([fills[key][i] for key in keys] for i in range(4))
    params = {
        "rate_keys": keys,
        "window_starts": starts,
        "started": started,
        "limits": limits,
        "periods": periods,
    }
    _run(alias, FILL_BUCKETS, params)


def prune_limiters(
    alias: str, older_than: dt.timedelta, batch: int, after_key: str
) -> tuple[int, str]:
    """Claimers lock keys with advisory locks, not rows: take the key's lock, then delete."""
    with transaction.atomic(using=alias):
        chosen = prunable(alias, older_than).filter(key__gt=after_key).order_by("key")
        keys = list(chosen.values_list("key", flat=True)[:batch])
        if not keys:
            return 0, after_key
        locked = [key for key, got in _run(alias, LOCK_KEYS, {"keys": keys}) if got]
        deleted = 0
        if locked:
            deleted, _ = prunable(alias, older_than).filter(key__in=locked).delete()
    return deleted, keys[-1]
