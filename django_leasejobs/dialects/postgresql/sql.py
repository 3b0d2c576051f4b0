"""PostgreSQL's fragments of SQL, each written once, for the statements that compose them.

Those every database shares (the tables, the waiting test, the claim order, the limits'
predicates) are in ``dialects.sql``; these are PostgreSQL's own: its clock, its advisory
locks, the pause test as an anti-join, the loose index scan of the queues. Values are never
here: the statements that compose these fragments take named parameters (``%(name)s``) and are
run with a dict.
"""

from __future__ import annotations

from ...models import Job
from ..sql import CLAIM_ORDER, JOB, LIMITER, PAUSE, WAITING, WITH_LIMITS, WITHOUT_LIMITS
from ..tokens import succeeded_sql

__all__ = [
    "ATTEMPT_START",
    "CLAIMED_COLUMNS",
    "CLAIM_ORDER",
    "CONCURRENCY_LOCK",
    "DUE",
    "GIVEN_QUEUES",
    "JOB",
    "LIMITER",
    "LIVE",
    "NOT_CLAIMED",
    "PAUSE",
    "RATE_LOCK",
    "RESULT_OF_ROW",
    "SUCCEEDED_SET",
    "TOKENS",
    "WAITING",
    "WITHOUT_LIMITS",
    "WITH_LIMITS",
    "not_paused",
    "queue_scan",
    "try_lock",
]

LIVE = f"{JOB}_live"
"""The job table's live partition, once migration 0026 has partitioned it (``history``)."""

DUE = f"{WAITING} AND run_at <= STATEMENT_TIMESTAMP()"
"""A waiting job whose time has come (the database's clock)."""

ATTEMPT_START = """status = 'running',
    attempt = attempt + 1,
    lease_owner = %(worker_id)s,
    lease_expires_at = STATEMENT_TIMESTAMP()
        + make_interval(secs => COALESCE(lease_seconds, %(lease_seconds)s)),
    started_at = STATEMENT_TIMESTAMP()"""
"""What a claim sets on a row it leases: the next attempt (the fencing token), its owner, and
a lease of the job's own length or else the worker's."""

CONCURRENCY_LOCK = "'c:' || concurrency_key"
RATE_LOCK = "'r:' || rate_key"
"""A job's limiter keys, as ``within_limits.concurrency_lock`` and ``rate_lock`` spell them."""


def try_lock(key: str) -> str:
    """Try the transaction-level advisory lock of the limiter key ``key`` (an SQL text
    expression), never waiting. Claims and limiter pruning take this same lock of the same
    text: keys are hashed to 64 bits, and two keys sharing a hash only make one wait a round."""
    return f"pg_try_advisory_xact_lock(hashtextextended({key}, 0))"


def not_paused(row: str) -> str:
    """No pause holds back the job row aliased ``row``: not its queue, not its name."""
    return f"""NOT EXISTS (
        SELECT 1 FROM {PAUSE} AS p
        WHERE (p.kind = 'queue' AND p.name = {row}.queue)
           OR (p.kind = 'job' AND p.name = {row}.name)
    )"""


def queue_scan(kind: str, cte: str, table: str = JOB) -> str:
    """The queues that have waiting jobs of ``kind`` (``WITH_LIMITS`` or ``WITHOUT_LIMITS``),
    one index entry read per queue (a loose index scan), as the recursive CTE named ``cte``;
    read in ``table`` (the job table, or its live partition: ``claim_table``)."""
    return f"""
    (SELECT queue FROM {table} WHERE {WAITING} AND {kind} ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT t.queue FROM {table} AS t
            WHERE {WAITING} AND {kind} AND t.queue > q.queue
            ORDER BY t.queue LIMIT 1)
    FROM {cte} AS q WHERE q.queue IS NOT NULL
"""


GIVEN_QUEUES = "SELECT unnest(%(queues)s::text[])"
"""The queues named by the ``queues`` parameter, as a CTE's rows."""

NOT_CLAIMED = ("errors", "result", "last_error")
"""Columns a claim does not return. A worker needs none of them, and decoding a retried job's
tracebacks on every claim is the costliest part of reading the rows back; Django loads them on
access, like any deferred field."""

CLAIMED_COLUMNS = ", ".join(
    f'"{f.column}"' for f in Job._meta.concrete_fields if f.name not in NOT_CLAIMED
)
"""The columns a claim returns."""

# The results come as one JSON array (one text parameter, cheap to send; a jsonb[] parameter is
# quoted element by element), the n-th for the n-th id. JSON null and "no result" are both
# stored as SQL NULL, as complete() does.
RESULT_OF_ROW = "NULLIF(%(results)s::jsonb -> (t.n::int - 1), 'null'::jsonb)"
"""A completed row's result, read from the batch's JSON array by its position ``t.n``."""

TOKENS = "unnest(%(ids)s::bigint[], %(attempts)s::bigint[]) WITH ORDINALITY AS t(id, attempt, n)"
"""A batch's tokens as rows (id, attempt, position), for an UPDATE's FROM."""

SUCCEEDED_SET = succeeded_sql("STATEMENT_TIMESTAMP()", RESULT_OF_ROW)
"""What a success writes (``tokens.SUCCEEDED``), in PostgreSQL's words, for rows joined
with ``TOKENS``."""
