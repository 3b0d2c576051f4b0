"""The raw-SQL ceiling: the least a correct lease worker can do, written with psycopg alone.

One process loops: claim a batch in one statement (SKIP LOCKED, attempt + 1, a lease), call a
no-op for each row, then complete the whole batch in one statement fenced per row by
(id, attempt, running). No Django, no logging, no heartbeat thread: what is left is the
database's share of the work, so the app's throughput over this is its efficiency.

Run: ``python raw_worker.py CONNINFO BATCH WORKER_ID``; exits when nothing is due.
"""

from __future__ import annotations

import sys
from typing import Any

import psycopg

_CLAIM = """
WITH due AS (
    SELECT id FROM {table}
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP() AND queue = %s
    ORDER BY priority DESC, run_at, id
    LIMIT %s
    FOR UPDATE SKIP LOCKED
)
UPDATE {table} AS j
SET status = 'running', attempt = j.attempt + 1, lease_owner = %s,
    lease_expires_at = STATEMENT_TIMESTAMP() + INTERVAL '60 seconds',
    started_at = STATEMENT_TIMESTAMP()
-- ANY(ARRAY(...)), not a join with "due": a join lets the planner hash the whole table.
WHERE j.id = ANY(ARRAY(SELECT id FROM due)) AND j.status IN ('pending', 'failed')
RETURNING j.id, j.attempt, j.name, j.args, j.kwargs
"""
# Where the job table is partitioned, the claim reads its live partition, as the library's
# claims do (planned over the parent, a claim cost twice as much to plan).
CLAIM = _CLAIM.format(table="django_leasejobs_job")
CLAIM_LIVE = _CLAIM.format(table="django_leasejobs_job_live")
LIVE_PARTITION = "SELECT to_regclass('django_leasejobs_job_live') IS NOT NULL"

_COMPLETE = """
UPDATE django_leasejobs_job AS j
SET status = 'succeeded', finished_at = STATEMENT_TIMESTAMP(), lease_owner = '',
    lease_expires_at = NULL, live_dedupe_key = NULL{history}
FROM unnest(%s::bigint[], %s::integer[]) AS t(id, attempt)
WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running'
RETURNING j.id
"""
# The finished row goes to the history partitions, as the library's completion sends it; a
# table from before the flag (a --baseline) has no such column.
COMPLETE = _COMPLETE.format(history=", in_history = TRUE")
COMPLETE_WITHOUT_HISTORY = _COMPLETE.format(history="")
HISTORY_COLUMN = """SELECT EXISTS (SELECT 1 FROM information_schema.columns
    WHERE table_name = 'django_leasejobs_job' AND column_name = 'in_history')"""


def noop(*args: Any, **kwargs: Any) -> None:
    """The job: nothing."""


def main(conninfo: str, batch: int, worker_id: str) -> int:
    done = 0
    # prepare_threshold=None: each statement is planned with its actual arrays. A prepared
    # statement's generic plan guessed the array sizes and, depending on the indexes, joined the
    # batch against every running row in a nested loop (10x slower per completion).
    with psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as conn:
        found = conn.execute(HISTORY_COLUMN).fetchone()
        complete = COMPLETE if found and found[0] else COMPLETE_WITHOUT_HISTORY
        live = conn.execute(LIVE_PARTITION).fetchone()
        claim = CLAIM_LIVE if live and live[0] else CLAIM
        while True:
            try:
                rows = conn.execute(claim, ["default", batch, worker_id]).fetchall()
            except psycopg.errors.SerializationFailure:
                # A row it read was completed and moved to a history partition meanwhile
                # (SQLSTATE 40001 at READ COMMITTED): claimed again at once, as the library does.
                continue
            if not rows:
                return done
            for _id, _attempt, _name, args, kwargs in rows:
                noop(*args, **kwargs)
            ids = [row[0] for row in rows]
            attempts = [row[1] for row in rows]
            done += len(conn.execute(complete, [ids, attempts]).fetchall())


if __name__ == "__main__":
    print(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
