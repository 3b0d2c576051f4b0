"""Filling a database with millions of job rows fast, for the ``--scale`` section.

Rows are made by ``INSERT ... SELECT ... FROM generate_series`` in chunks of a million (one
statement per chunk keeps each transaction's WAL bounded and shows progress); every value is a
parameter, the series number only picks among them. Two shapes:

- ``mix``: the table of issue #19 as measured in production: 10% due, 10% waiting for a future
  ``run_at``, the rest finished (succeeded), and 10,000 dead jobs with their dead letters.
- ``pending``: the design's "10 million active jobs": every row pending (half due, half in the
  future), plus the same 10,000 dead jobs.
- ``history``: a million due jobs (fewer in a smaller fill: a fiftieth) beside finished ones
  over 30 days, and the 10,000 dead: the claim beside a long history.
- ``due``: every row due, nothing finished: the same claim with no history beside it.

Finished rows are written as a finish writes them (``in_history``), so on PostgreSQL they go
to the history partitions, made for their 30 days first.

Jobs spread over four queues and eight names, priorities over -2..2; dead letters over twenty
error fingerprints. The fill records its shape and size in a one-row table, so a later run
with ``--scale-reuse`` can tell whether the database already holds what it asks for.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from . import database
from .database import JOB_TABLE

DEAD_LETTER_TABLE = "django_leasejobs_deadletter"
MARKER_TABLE = "benchmark_scale_fill"
CHUNK = 1_000_000
DEAD = 10_000
QUEUES = ["default", "emails", "reports", "bulk"]
NAMES = [f"testapp.jobs.scale_{n}" for n in range(8)]
SHAPES = ("mix", "pending", "history", "due")
HISTORY_DUE = 1_000_000
MIN_TOTAL = 20_000
"""The smallest fill whose ``mix`` shape has every kind of row (the dead alone are 10,000)."""

# One statement for every kind of row: the kind differs only in its parameters. %(...)s are
# driver parameters; g is the series number (1..count), used to spread rows over the choices.
_INSERT = """
INSERT INTO {table} (name, args, kwargs, queue, priority, status, run_at, attempt, released,
    max_attempts, lease_owner, created_at, started_at, finished_at, last_error, errors,
    finished_by, task_backend{history_column})
SELECT (%(names)s::text[])[1 + g %% 8], '[]', '{{}}', (%(queues)s::text[])[1 + g %% 4],
    (g %% 5) - 2, %(status)s,
    STATEMENT_TIMESTAMP() + make_interval(secs => %(run_at_offset)s + (g %% %(spread)s)),
    %(attempt)s, 0, 5, '', STATEMENT_TIMESTAMP() - make_interval(secs => g %% %(spread)s),
    CASE WHEN %(finished)s THEN STATEMENT_TIMESTAMP() - make_interval(secs => g %% %(spread)s)
    END,
    CASE WHEN %(finished)s THEN STATEMENT_TIMESTAMP() - make_interval(secs => g %% %(spread)s)
    END,
    %(last_error)s, '[]', %(finished_by)s, ''{history_value}
FROM generate_series(1, %(count)s) AS g
"""

DAY = 86_400


def _kinds(shape: str, total: int) -> list[tuple[str, int, dict[str, Any]]]:
    """(label, row count, parameters) of each kind of row the shape holds, oldest first."""
    waiting = {"status": "pending", "attempt": 0, "finished": False, "last_error": ""}
    waiting |= {"finished_by": ""}
    due = waiting | {"run_at_offset": -DAY, "spread": DAY}  # due for up to a day
    future = waiting | {"run_at_offset": 3600, "spread": DAY}  # due in 1 h to 25 h
    finished = {"status": "succeeded", "attempt": 1, "finished": True, "last_error": ""}
    finished |= {"finished_by": "scale-worker", "run_at_offset": -30 * DAY, "spread": 30 * DAY}
    dead = finished | {"status": "dead", "attempt": 5, "finished_by": "", "spread": 3 * DAY}
    dead |= {"last_error": "ValueError: scale"}
    if shape == "mix":
        tenth = total // 10
        return [
            ("finished", total - 2 * tenth - DEAD, finished),
            ("dead", DEAD, dead),
            ("future", tenth, future),
            ("due", tenth, due),
        ]
    if shape == "history":
        due_count = min(HISTORY_DUE, total // 50)
        return [
            ("finished", total - due_count - DEAD, finished),
            ("dead", DEAD, dead),
            ("due", due_count, due),
        ]
    if shape == "due":
        return [("due", total, due)]
    half = total // 2
    return [("dead", DEAD, dead), ("future", total - half, future), ("due", half, due)]


def fill(conn: psycopg.Connection[Any], shape: str, total: int, say: Callable[[str], None]) -> None:
    """Insert ``total`` job rows of ``shape`` (into an empty, migrated database), then ANALYZE."""
    conn.execute("SET synchronous_commit = off")  # this session only: a scratch database
    _history_partitions(conn)
    for label, count, params in _kinds(shape, total):
        _insert(conn, label, count, params, say)
    _dead_letters(conn)
    say("  VACUUM ANALYZE")
    for name in (JOB_TABLE, DEAD_LETTER_TABLE):  # a partitioned table: each partition
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(name)))
    mark(conn, shape, total)


SPANS = {state: dt.timedelta(days=7.5) for state in ("succeeded", "dead", "cancelled")}
"""The partitions of a project keeping 30 days of history (a quarter of the age each)."""


def _history_partitions(conn: psycopg.Connection[Any]) -> None:
    """The history partitions back 31 days (PostgreSQL, once the job table is partitioned),
    as ``movejobhistory`` makes them for older rows, as wide as 30 days' retention makes them.
    A ``--baseline`` from before them has none to make."""
    try:
        from django_leasejobs.dialects.postgresql import history
    except ImportError:
        return
    with conn.transaction(), conn.cursor() as cursor:
        if not history.is_partitioned(cursor):
            return
        now = cursor.execute("SELECT STATEMENT_TIMESTAMP()").fetchone()[0]  # type: ignore[index]
        history.make_since(cursor, now - dt.timedelta(days=31), now, SPANS)


def _insert(
    conn: psycopg.Connection[Any],
    label: str,
    count: int,
    params: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    history = database.has_history(conn)
    statement = sql.SQL(_INSERT).format(
        table=sql.Identifier(JOB_TABLE),
        history_column=sql.SQL(", in_history" if history else ""),
        history_value=sql.SQL(", %(finished)s" if history else ""),
    )
    done = 0
    while done < count:
        chunk = min(CHUNK, count - done)
        start = time.perf_counter()
        conn.execute(statement, params | {"names": NAMES, "queues": QUEUES, "count": chunk})
        done += chunk
        say(f"  {label}: {done:,}/{count:,} rows ({time.perf_counter() - start:.0f} s)")


def refill_finished(conn: psycopg.Connection[Any], count: int) -> None:
    """Write ``count`` finished rows again (after pruning), so the table keeps its size."""
    finished = dict(_kinds("mix", 10 * DEAD)[0][2])
    _insert(conn, "finished", count, finished, lambda _: None)
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(JOB_TABLE)))


def _dead_letters(conn: psycopg.Connection[Any]) -> None:
    """One dead letter per dead job, over twenty fingerprints, written when the job died."""
    conn.execute(
        sql.SQL(
            """
            INSERT INTO {letters} (job_id, name, args, kwargs, queue, reason, errors, created_at,
                fingerprint)
            SELECT id, name, args, kwargs, queue, %s, '[]', finished_at,
                md5((id %% 20)::text)
            FROM {jobs} WHERE status = %s
            """
        ).format(letters=sql.Identifier(DEAD_LETTER_TABLE), jobs=sql.Identifier(JOB_TABLE)),
        ["attempts exhausted", "dead"],
    )


def mark(conn: psycopg.Connection[Any], shape: str, total: int) -> None:
    conn.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (shape text, total bigint)").format(
            sql.Identifier(MARKER_TABLE)
        )
    )
    conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(MARKER_TABLE)))
    conn.execute(
        sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(sql.Identifier(MARKER_TABLE)),
        [shape, total],
    )


def filled_as(conn: psycopg.Connection[Any]) -> tuple[str, int] | None:
    """The (shape, total) a previous fill recorded, or None for a database never filled."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [MARKER_TABLE]).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(
        sql.SQL("SELECT shape, total FROM {}").format(sql.Identifier(MARKER_TABLE))
    ).fetchone()
    return (row[0], int(row[1])) if row else None
