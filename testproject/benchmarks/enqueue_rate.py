"""Section ``enqueue``: jobs per second, one at a time and in bulk, beside raw psycopg.

Single enqueue runs in autocommit, so each job is its own transaction, exactly like a raw
``INSERT ... RETURNING`` on a psycopg connection in autocommit; the two are interleaved in
blocks so a noisy neighbour slows both alike. Bulk compares ``enqueue_many`` with raw
multi-row INSERTs of the same size (1,000 rows) in one transaction. No-op jobs have no
arguments; ``bulk_args_per_s`` is the same bulk enqueue of jobs with two integer arguments
each (every row's arguments validated, measured and sent), what most real bulk enqueues carry.
"""

from __future__ import annotations

import time
from typing import Any

from testapp import jobs

from . import database
from .database import Target

RAW_INSERT = """
INSERT INTO django_leasejobs_job (name, args, kwargs, queue, priority, status, run_at, attempt,
    released, max_attempts, lease_owner, created_at, last_error, errors, finished_by, task_backend)
VALUES (%s, %s, %s, %s, 0, 'pending', STATEMENT_TIMESTAMP(), 0, 0, 5, '', STATEMENT_TIMESTAMP(),
    '', '[]', '', '')
RETURNING id, run_at, created_at
"""
RAW_BULK_ROW = (
    "(%s, '[]', '{}', 'default', 0, 'pending', STATEMENT_TIMESTAMP(), 0, 0, 5, '', "
    "STATEMENT_TIMESTAMP(), '', '[]', '', '')"
)
BLOCK = 250
BULK_ROWS = 1000


def _raw_bulk_insert(rows: int) -> str:
    head = RAW_INSERT.split("VALUES")[0]
    return f"{head} VALUES {', '.join([RAW_BULK_ROW] * rows)} RETURNING id"


def run(target: Target, *, jobs_count: int, single_count: int) -> dict[str, Any]:
    with target.connect() as raw:
        database.reset(raw)
        ours_seconds = raw_seconds = 0.0
        done = 0
        while done < single_count:
            block = min(BLOCK, single_count - done)
            start = time.perf_counter()
            for _ in range(block):
                jobs.noop.enqueue()
            ours_seconds += time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(block):
                raw.execute(RAW_INSERT, [database.NOOP, "[]", "{}", "default"]).fetchone()
            raw_seconds += time.perf_counter() - start
            done += block

        database.reset(raw)
        start = time.perf_counter()
        jobs.noop.enqueue_many([((), {})] * jobs_count)
        bulk_seconds = time.perf_counter() - start

        database.reset(raw)
        start = time.perf_counter()
        jobs.add.enqueue_many([((i, i), {}) for i in range(jobs_count)])
        bulk_args_seconds = time.perf_counter() - start

        database.reset(raw)
        start = time.perf_counter()
        with raw.transaction():
            left = jobs_count
            while left:
                rows = min(BULK_ROWS, left)
                raw.execute(_raw_bulk_insert(rows), [database.NOOP] * rows).fetchall()
                left -= rows
        raw_bulk_seconds = time.perf_counter() - start
        database.reset(raw)

    single = single_count / ours_seconds
    raw_single = single_count / raw_seconds
    bulk = jobs_count / bulk_seconds
    raw_bulk = jobs_count / raw_bulk_seconds
    return {
        "single_per_s": single,
        "raw_single_per_s": raw_single,
        "single_vs_raw": single / raw_single,
        "bulk_per_s": bulk,
        "raw_bulk_per_s": raw_bulk,
        "bulk_vs_raw": bulk / raw_bulk,
        "bulk_args_per_s": jobs_count / bulk_args_seconds,
    }
