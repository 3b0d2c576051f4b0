"""Section ``enqueue``: jobs per second, one at a time and in bulk, beside raw psycopg and PgQueuer.

Single enqueue runs in autocommit, so each job is its own transaction, exactly like a raw
``INSERT ... RETURNING`` on a psycopg connection in autocommit. The variants are interleaved in
blocks, each round starting with the next variant, so a noisy neighbour slows them alike:
``enqueue()`` as Django configures psycopg by default (client-side binding, nothing prepared,
kept for connection poolers) and with prepared statements allowed (``prepare_threshold=5`` on
the open connection; prepared only where Django binds on the server); the raw INSERT sent as
Django sends it (psycopg's ``ClientCursor``, never prepared), as psycopg runs it by default
(bound on the server, prepared after five runs), and through a Django cursor (one per statement,
as any Django code gets it: the ceiling of an enqueue that goes through Django's cursor); the
enqueue's own statement (its SQL and parameters, captured once, with the NOTIFY it carries)
through a Django cursor, with no validation and no ``Job`` built: the ceiling of an enqueue
that sends that statement; PgQueuer's ``enqueue`` of one job (asyncpg, its own table, its
defaults). ``single_vs_raw`` is the target: Django's default against the raw INSERT sent the
same way.

Bulk compares ``enqueue_many`` of N jobs in one call (and in calls of 1,000, each its own
transaction) with raw INSERTs of the same rows in one transaction (a multi-row ``VALUES`` list
and an ``INSERT ... SELECT`` from an array, 1,000 rows a statement: the database's ceiling) and
with PgQueuer's ``enqueue`` of lists of 1,000; and with COPY of the same rows: given their ids
(read from the sequence first, with the database's time, as enqueue_many must return them) and
without (the rows take the columns' defaults, nothing comes back: COPY's ceiling). Each bulk
variant runs ``BULK_REPEATS`` times,
interleaved, from an empty table; the figure is its median. No-op jobs have no arguments;
``bulk_args_per_s`` is the same bulk enqueue of jobs with two integer arguments each.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
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
RAW_BULK_SELECT = """
INSERT INTO django_leasejobs_job (name, args, kwargs, queue, priority, status, run_at, attempt,
    released, max_attempts, lease_owner, created_at, last_error, errors, finished_by, task_backend)
SELECT name, '[]', '{}', 'default', 0, 'pending', STATEMENT_TIMESTAMP(), 0, 0, 5, '',
    STATEMENT_TIMESTAMP(), '', '[]', '', ''
FROM unnest(%s::text[]) AS t(name)
RETURNING id, run_at, created_at
"""
RAW_COPY_COLUMNS = (
    "name, args, kwargs, queue, priority, status, attempt, released, max_attempts, lease_owner, "
    "last_error, errors, finished_by, task_backend"
)
RAW_COPY = "COPY django_leasejobs_job ({columns}) FROM STDIN"
RAW_IDS = """
SELECT nextval(pg_get_serial_sequence('django_leasejobs_job', 'id')), STATEMENT_TIMESTAMP()
FROM generate_series(1, %s)
"""
BLOCK = 250
BULK_ROWS = 1000
BULK_REPEATS = 3


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


def _django_cursor_insert(sql: str, params: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        cursor.fetchone()


def _enqueue_statement() -> tuple[str, Any]:
    """The INSERT ``enqueue()`` sends for a no-op job, and its parameters, as Django runs it."""
    sent: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        jobs.noop.enqueue()
    return next((sql, params) for sql, params in sent if sql.lstrip().startswith("INSERT"))


class PgQueuer:
    """PgQueuer's ``Queries.enqueue`` on its own asyncpg connection, driven from this thread.

    None of it is imported unless the ``benchmark`` extra installed PgQueuer; its schema is
    installed in the scratch database for the section and removed afterwards.
    """

    ENTRYPOINT = "noop"

    def __init__(self, target: Target) -> None:
        import asyncpg
        from pgqueuer import AsyncpgDriver
        from pgqueuer.queries import Queries

        self.loop = asyncio.new_event_loop()
        self.connection = self.loop.run_until_complete(asyncpg.connect(target.url))
        self.queries = Queries(AsyncpgDriver(self.connection))
        self.loop.run_until_complete(self._install())

    async def _install(self) -> None:
        if await self.queries.schema_is_installed():
            await self.queries.uninstall()
        await self.queries.install()

    def time_single(self, count: int) -> float:
        """Seconds to enqueue ``count`` jobs one at a time (each its own transaction)."""

        async def block() -> float:
            start = time.perf_counter()
            for _ in range(count):
                await self.queries.enqueue(self.ENTRYPOINT, None, 0)
            return time.perf_counter() - start

        return self.loop.run_until_complete(block())

    def time_lists(self, count: int, size: int) -> float:
        """Seconds to enqueue ``count`` jobs in lists of ``size`` (one statement each)."""

        async def lists() -> float:
            start = time.perf_counter()
            for first in range(0, count, size):
                n = min(size, count - first)
                await self.queries.enqueue([self.ENTRYPOINT] * n, [None] * n, [0] * n)
            return time.perf_counter() - start

        return self.loop.run_until_complete(lists())

    def clear(self) -> None:
        self.loop.run_until_complete(self.queries.clear_queue())

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.queries.uninstall())
            self.loop.run_until_complete(self.connection.close())
        finally:
            self.loop.close()


def _pgqueuer(target: Target) -> PgQueuer | None:
    try:
        import pgqueuer  # noqa: F401
    except ImportError:
        return None
    return PgQueuer(target)


def _single(
    raw: psycopg.Connection[Any], pgqueuer: PgQueuer | None, single_count: int
) -> dict[str, float]:
    """Seconds per variant for ``single_count`` jobs one at a time, interleaved in blocks."""
    params = [database.NOOP, "[]", "{}", "default"]
    as_django = psycopg.ClientCursor(raw)
    statement = _enqueue_statement()
    variants: dict[str, Callable[[int], float]] = {
        "ours": lambda n: _time_block(n, jobs.noop.enqueue),
        "raw": lambda n: _time_block(n, lambda: as_django.execute(RAW_INSERT, params).fetchone()),
        "raw_prepared": lambda n: _time_block(
            n, lambda: raw.execute(RAW_INSERT, params).fetchone()
        ),
        "ours_prepared": _prepared_enqueue,
        "django_cursor": lambda n: _time_block(
            n, lambda: _django_cursor_insert(RAW_INSERT, params)
        ),
        "statement": lambda n: _time_block(n, lambda: _django_cursor_insert(*statement)),
    }
    if pgqueuer is not None:
        variants["pgqueuer"] = pgqueuer.time_single
    seconds = dict.fromkeys(variants, 0.0)
    names = list(variants)
    done = 0
    while done < single_count:
        block = min(BLOCK, single_count - done)
        # Each round starts with the next variant, so none always follows the same one.
        turn = (done // BLOCK) % len(names)
        for name in names[turn:] + names[:turn]:
            seconds[name] += variants[name](block)
        done += block
    return seconds


def _prepared_enqueue(count: int) -> float:
    with _prepared_statements(5):
        return _time_block(count, jobs.noop.enqueue)


def _bulk(
    raw: psycopg.Connection[Any], pgqueuer: PgQueuer | None, jobs_count: int
) -> dict[str, float]:
    """Median seconds per bulk variant, each from an empty table, interleaved."""

    def ours() -> None:
        jobs.noop.enqueue_many([((), {})] * jobs_count)

    def ours_1000() -> None:
        for first in range(0, jobs_count, BULK_ROWS):
            jobs.noop.enqueue_many([((), {})] * min(BULK_ROWS, jobs_count - first))

    def ours_args() -> None:
        jobs.add.enqueue_many([((i, i), {}) for i in range(jobs_count)])

    def raw_values() -> None:
        with raw.transaction():
            for first in range(0, jobs_count, BULK_ROWS):
                rows = min(BULK_ROWS, jobs_count - first)
                raw.execute(_raw_bulk_insert(rows), [database.NOOP] * rows).fetchall()

    def raw_select() -> None:
        with raw.transaction():
            for first in range(0, jobs_count, BULK_ROWS):
                rows = min(BULK_ROWS, jobs_count - first)
                raw.execute(RAW_BULK_SELECT, [[database.NOOP] * rows]).fetchall()

    def raw_copy(ids: bool) -> None:
        # COPY returns nothing. With ``ids``, what enqueue_many gives back is read first (an
        # id per row from the sequence, and the database's time) and written into the rows;
        # without, the rows take the columns' defaults and nothing comes back (River's
        # InsertManyFast): the ceiling of a COPY.
        constant = (database.NOOP, "[]", "{}", "default", 0, "pending", 0, 0, 5, "", "", "[]")
        with raw.transaction():
            if not ids:
                with raw.cursor().copy(RAW_COPY.format(columns=RAW_COPY_COLUMNS)) as copy:
                    for _ in range(jobs_count):
                        copy.write_row((*constant, "", ""))
                return
            given = raw.execute(RAW_IDS, [jobs_count]).fetchall()
            columns = f"id, run_at, created_at, {RAW_COPY_COLUMNS}"
            with raw.cursor().copy(RAW_COPY.format(columns=columns)) as copy:
                for job_id, now in given:
                    copy.write_row((job_id, now, now, *constant, "", ""))

    variants: dict[str, Callable[[], Any]] = {
        "bulk": ours,
        "bulk_1000": ours_1000,
        "bulk_args": ours_args,
        "raw_bulk": raw_values,
        "raw_bulk_select": raw_select,
        "raw_copy": lambda: raw_copy(ids=True),
        "raw_copy_no_ids": lambda: raw_copy(ids=False),
    }
    if pgqueuer is not None:
        variants["pgqueuer_bulk_1000"] = lambda: pgqueuer.time_lists(jobs_count, BULK_ROWS)
    timings: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for repeat in range(BULK_REPEATS):
        turn = repeat % len(names)
        for name in names[turn:] + names[:turn]:
            database.reset(raw)
            if pgqueuer is not None:
                pgqueuer.clear()
            start = time.perf_counter()
            variants[name]()
            timings[name].append(time.perf_counter() - start)
    database.reset(raw)
    return {name: statistics.median(values) for name, values in timings.items()}


def run(target: Target, *, jobs_count: int, single_count: int) -> dict[str, Any]:
    with target.connect() as raw:
        database.reset(raw)
        pgqueuer = _pgqueuer(target)
        try:
            single = _single(raw, pgqueuer, single_count)
            database.reset(raw)
            bulk = _bulk(raw, pgqueuer, jobs_count)
        finally:
            if pgqueuer is not None:
                pgqueuer.close()
        database.reset(raw)

    rate = {name: single_count / seconds for name, seconds in single.items()}
    out = {
        "single_per_s": rate["ours"],
        "raw_single_per_s": rate["raw"],
        "single_vs_raw": rate["ours"] / rate["raw"],
        "django_cursor_single_per_s": rate["django_cursor"],
        "django_cursor_vs_raw": rate["django_cursor"] / rate["raw"],
        "single_vs_django_cursor": rate["ours"] / rate["django_cursor"],
        "statement_single_per_s": rate["statement"],
        "statement_vs_raw": rate["statement"] / rate["raw"],
        "single_vs_statement": rate["ours"] / rate["statement"],
        "single_prepared_per_s": rate["ours_prepared"],
        "raw_single_prepared_per_s": rate["raw_prepared"],
        "single_vs_raw_prepared": rate["ours"] / rate["raw_prepared"],
        "single_prepared_vs_raw_prepared": rate["ours_prepared"] / rate["raw_prepared"],
    }
    per_s = {name: jobs_count / seconds for name, seconds in bulk.items()}
    out.update(
        {
            "bulk_per_s": per_s["bulk"],
            "raw_bulk_per_s": per_s["raw_bulk"],
            "bulk_vs_raw": per_s["bulk"] / per_s["raw_bulk"],
            "raw_bulk_select_per_s": per_s["raw_bulk_select"],
            "bulk_vs_raw_select": per_s["bulk"] / per_s["raw_bulk_select"],
            "bulk_1000_per_s": per_s["bulk_1000"],
            "bulk_args_per_s": per_s["bulk_args"],
            "raw_copy_per_s": per_s["raw_copy"],
            "raw_copy_vs_raw_select": per_s["raw_copy"] / per_s["raw_bulk_select"],
            "raw_copy_no_ids_per_s": per_s["raw_copy_no_ids"],
            "raw_copy_no_ids_vs_raw_select": per_s["raw_copy_no_ids"] / per_s["raw_bulk_select"],
        }
    )
    if pgqueuer is not None:
        out.update(
            {
                "pgqueuer_single_per_s": rate["pgqueuer"],
                "single_vs_pgqueuer": rate["ours"] / rate["pgqueuer"],
                "statement_vs_pgqueuer": rate["statement"] / rate["pgqueuer"],
                "django_cursor_vs_pgqueuer": rate["django_cursor"] / rate["pgqueuer"],
                "pgqueuer_bulk_1000_per_s": per_s["pgqueuer_bulk_1000"],
                "bulk_vs_pgqueuer_1000": per_s["bulk"] / per_s["pgqueuer_bulk_1000"],
                "bulk_1000_vs_pgqueuer_1000": per_s["bulk_1000"] / per_s["pgqueuer_bulk_1000"],
                "raw_bulk_select_vs_pgqueuer_1000": per_s["raw_bulk_select"]
                / per_s["pgqueuer_bulk_1000"],
                "raw_copy_vs_pgqueuer_1000": per_s["raw_copy"] / per_s["pgqueuer_bulk_1000"],
            }
        )
    return out
