"""PostgreSQL's claim statements without limits: one queue, the queues given, every queue.

Each takes the due rows it read with ``FOR UPDATE SKIP LOCKED`` and starts their attempts in the
same statement; the shape of each, and why, is beside it. Each is written for the job table and for
its live partition, which a claim names where the table is partitioned (``claim_table``). The
limited claim's statements are in ``limited``, the fragments they share in ``sql``.
"""

from __future__ import annotations

from typing import NamedTuple

from .claim_table import TABLES
from .sql import (
    ATTEMPT_START,
    CLAIM_ORDER,
    CLAIMED_COLUMNS,
    DUE,
    GIVEN_QUEUES,
    PAUSE,
    WAITING,
    WITHOUT_LIMITS,
    queue_scan,
)


def _take_due(table: str) -> str:
    return f"""
UPDATE {table} AS j
SET {ATTEMPT_START}
-- ANY(ARRAY(...)) rather than a join with "due": the planner then always fetches the claimed
-- rows by primary key, where a join may hash the whole table (a seq scan per claim).
-- The status test again: the compare-and-set, in case the row changed after the snapshot.
WHERE id = ANY(ARRAY(SELECT id FROM due)) AND {WAITING}
RETURNING {CLAIMED_COLUMNS}
"""


# An anti-join on the pause table's unique index: the claim keeps its ordered index scan. (A
# "name <> ALL(ARRAY(...))" test is estimated to keep almost no row, and the planner then
# sorts the whole backlog instead.)
def _job_not_paused(table: str) -> str:
    return f"NOT EXISTS (SELECT 1 FROM {PAUSE} AS p WHERE p.kind = 'job' AND p.name = {table}.name)"


def _queue_not_paused(queue: str) -> str:
    """The queue ``queue`` (an SQL expression) is not paused."""
    return f"NOT EXISTS (SELECT 1 FROM {PAUSE} AS p WHERE p.kind = 'queue' AND p.name = {queue})"


def _claim_one_queue(table: str) -> str:
    return f"""
WITH due AS (
    SELECT id FROM {table}
    WHERE {DUE} AND queue = %(queue)s AND {WITHOUT_LIMITS}
      -- Pauses: the queue's test names no column of the row, so it is checked once, before
      -- the scan (a paused queue reads no job); a paused job name is filtered row by row.
      AND {_queue_not_paused("%(queue)s")}
      AND {_job_not_paused(table)}
    ORDER BY {CLAIM_ORDER}
    LIMIT %(batch)s
    -- SKIP LOCKED: a row another claimer is taking is passed over, not waited for, so
    -- concurrent workers split the due rows instead of queueing behind one another.
    FOR UPDATE SKIP LOCKED
){_take_due(table)}"""


# Several queues, or all of them. The claimable index leads with the queue, so one ordered scan
# cannot serve them all (PostgreSQL would sort every due row on each claim, a cost that grows
# with the backlog). Instead: list the queues (given, or found with a loose index scan that
# reads one index entry per queue), read the first ``spare`` (twice the batch) due entries of
# each queue from the index without locking them, keep the best ``spare`` of those, and lock
# the best ``batch`` of these that no other claimer holds. Locking each queue's first ``batch``
# rows instead held queues x batch rows until the claim committed, and a concurrent claimer
# skipped them all (a test in tests/protocol/test_races.py). The spares are for concurrent
# claimers: two of them read the same best rows, and the second takes the spares the first
# did not lock. They are read in each queue, not only across queues: with one busy queue, a
# second claimer found only the rows the first was locking, came back empty and slept while
# jobs were due, so a second worker process added nothing. (An index without the queue in
# front would make this one ordered scan, at the price of one more index entry written by
# every enqueue: docs/benchmarks.md.)
def _claim_queues(queues: str, table: str) -> str:
    """The claim of the queues listed by ``queues`` (the recursive CTE's first part)."""
    return f"""
WITH RECURSIVE queues(queue) AS ({queues}),
candidates AS (
    SELECT c.id FROM queues AS q CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {table}
        WHERE {DUE} AND queue = q.queue AND {WITHOUT_LIMITS}
        ORDER BY {CLAIM_ORDER}
        LIMIT %(spare)s
    ) AS c
    -- A paused queue is dropped from the list before its rows are read.
    WHERE q.queue IS NOT NULL AND {_queue_not_paused("q.queue")}
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT %(spare)s
),
due AS (
    SELECT id FROM {table}
    -- Read again under the lock: the candidates were read without one.
    WHERE id = ANY(ARRAY(SELECT id FROM candidates)) AND {DUE} AND {_job_not_paused(table)}
    ORDER BY {CLAIM_ORDER}
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
){_take_due(table)}"""


class Claims(NamedTuple):
    """The claim statements over one table (``claim_table.TABLES``)."""

    one_queue: str
    given_queues: str
    every_queue: str


CLAIMS = {
    table: Claims(
        _claim_one_queue(table),
        _claim_queues(GIVEN_QUEUES, table),
        _claim_queues(queue_scan(WITHOUT_LIMITS, "queues", table), table),
    )
    for table in TABLES
}
"""The statements by the table they read: the job table, or its live partition."""
