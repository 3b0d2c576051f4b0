"""Section ``enqueue``: jobs per second, one at a time and in bulk, beside raw psycopg.

Single enqueue runs in autocommit, so each job is its own transaction, exactly like a raw
``INSERT ... RETURNING`` on a psycopg connection in autocommit. Four variants are interleaved
in blocks, each round starting with the next variant, so a noisy neighbour slows them alike:
``enqueue()`` as Django configures psycopg by default (client-side binding, nothing prepared,
kept for connection poolers) and with prepared statements allowed (``prepare_threshold=5`` on
the open connection; prepared only where Django binds on the server); the raw INSERT sent as
Django sends it (psycopg's ``ClientCursor``, never prepared) and as psycopg runs it by default
(bound on the server, prepared after five runs). ``single_vs_raw`` is the target: Django's
default against the raw INSERT sent the same way; ``single_vs_raw_prepared`` is information.
Bulk compares ``enqueue_many`` with raw multi-row INSERTs of the same size (1,000 rows) in one
transaction. No-op jobs have no arguments; ``bulk_args_per_s`` is the same bulk enqueue of
jobs with two integer arguments each, what most real bulk enqueues carry.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from django.db import connection
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


@contextlib.contextmanager
def _prepared_statements(threshold: int | None) -> Iterator[None]:
    """What ``OPTIONS={"prepare_threshold": threshold}`` gives, on the open connection."""
    connection.ensure_connection()
    driver = connection.connection
    before = driver.prepare_threshold
    driver.prepare_threshold = threshold
    try:
        yield
    finally:
        driver.prepare_threshold = before


def _time_block(block: int, call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    for _ in range(block):
        call()
    return time.perf_counter() - start


def run(target: Target, *, jobs_count: int, single_count: int) -> dict[str, Any]:
    with target.connect() as raw:
        database.reset(raw)
        params = [database.NOOP, "[]", "{}", "default"]
        as_django = psycopg.ClientCursor(raw)
        variants: dict[str, Callable[[], Any]] = {
            "ours": jobs.noop.enqueue,
            "raw": lambda: as_django.execute(RAW_INSERT, params).fetchone(),
            "raw_prepared": lambda: raw.execute(RAW_INSERT, params).fetchone(),
        }
        seconds = dict.fromkeys([*variants, "ours_prepared"], 0.0)
        done = 0
        names = [*variants, "ours_prepared"]
        while done < single_count:
            block = min(BLOCK, single_count - done)
            # Each round starts with the next variant, so none always follows the same one.
            turn = (done // BLOCK) % len(names)
            for name in names[turn:] + names[:turn]:
                if name == "ours_prepared":
                    with _prepared_statements(5):
                        seconds[name] += _time_block(block, jobs.noop.enqueue)
                else:
                    seconds[name] += _time_block(block, variants[name])
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

    single, raw_single, raw_prepared, prepared = (
        single_count / seconds[name] for name in ("ours", "raw", "raw_prepared", "ours_prepared")
    )
    bulk = jobs_count / bulk_seconds
    raw_bulk = jobs_count / raw_bulk_seconds
    return {
        "single_per_s": single,
        "raw_single_per_s": raw_single,
        "single_vs_raw": single / raw_single,
        "single_prepared_per_s": prepared,
        "raw_single_prepared_per_s": raw_prepared,
        "single_vs_raw_prepared": single / raw_prepared,
        "single_prepared_vs_raw_prepared": prepared / raw_prepared,
        "bulk_per_s": bulk,
        "raw_bulk_per_s": raw_bulk,
        "bulk_vs_raw": bulk / raw_bulk,
        "bulk_args_per_s": jobs_count / bulk_args_seconds,
    }
