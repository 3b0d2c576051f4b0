"""Section ``partitions``: retention of one day of finished jobs on PostgreSQL, the history
partition dropped whole against the same rows deleted in keyed batches.

The table gets ``--history-rows`` succeeded jobs that finished within one day three days ago,
in that day's history partition (written as a finish writes them), and ``--batched-rows``
more of the same age as an unpartitioned table holds them (in the live partition, where
retention deletes row by row). Then, in this process and one after the other, what retention
does with an age of two days: ``upkeep.drop_expired`` (the partition, whatever its size) and
the batched walk over the other rows (``upkeep.prune_finished``, batches of 1,000, the
``prunejobs`` default). The batched rate gives what the same day would cost row by row.

Then the move of an existing install's finished rows: ``--move-rows`` finished jobs written
as before the partitions (in the live partition) beside ``--jobs`` due ones, drained by two
``runjobworker --burst`` with no flags, alone and while ``movejobhistory`` moves the old rows
(started with the workers), the two drains timed from the new jobs' rows.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from psycopg import sql

from . import database, drain
from .database import JOB_TABLE, NOOP, Target
from .processes import Group

AGE = dt.timedelta(days=2)
BATCH = 1000

_FINISHED = """
INSERT INTO {table} (name, args, kwargs, queue, priority, status, run_at, attempt, released,
    max_attempts, lease_owner, created_at, started_at, finished_at, last_error, errors,
    finished_by, task_backend, in_history)
SELECT %(name)s, '[]', '{{}}', 'default', 0, 'succeeded', %(day)s, 1, 0, 5, '', %(day)s,
    %(day)s, %(day)s + make_interval(secs => (g %% 86000)::float), '', '[]', 'bench', '',
    %(in_history)s
FROM generate_series(1, %(count)s) AS g
"""


def _fill(target: Target, rows: int, batched_rows: int) -> dt.datetime:
    """Write both kinds of rows; return the day they finished in."""
    from django_leasejobs.dialects.postgresql import history  # not in a --baseline before it

    with target.connect() as conn:
        database.reset(conn)
        conn.execute("SET synchronous_commit = off")  # this session only: a scratch database
        with conn.transaction(), conn.cursor() as cursor:
            now = cursor.execute("SELECT STATEMENT_TIMESTAMP()").fetchone()[0]  # type: ignore[index]
            day = history.floor(now, dt.timedelta(days=1)) - dt.timedelta(days=3)
            history.make_since(cursor, day, now, {"succeeded": dt.timedelta(days=1)})
        statement = sql.SQL(_FINISHED).format(table=sql.Identifier(JOB_TABLE))
        for count, in_history in ((rows, True), (batched_rows, False)):
            conn.execute(
                statement, {"name": NOOP, "day": day, "count": count, "in_history": in_history}
            )
        database.vacuum_analyze(conn)  # the partitioned table: each partition
    return day


def _partition_rows(target: Target, day: dt.datetime) -> int:
    from django_leasejobs.dialects.postgresql import history

    name = f"{history.state_table('succeeded')}_{day:%Y%m%d_%H%M}"
    with target.connect() as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name))
        ).fetchone()
    return int(row[0]) if row else 0


def run(
    target: Target,
    *,
    rows: int,
    batched_rows: int,
    move_rows: int,
    jobs_count: int,
    timeout: float,
) -> dict[str, Any]:
    from django_leasejobs import upkeep

    day = _fill(target, rows, batched_rows)
    in_partition = _partition_rows(target, day)
    start = time.perf_counter()
    dropped = upkeep.drop_expired("succeeded", AGE)
    drop_s = time.perf_counter() - start

    deleted, after = 0, 0
    start = time.perf_counter()
    while True:
        count, last = upkeep.prune_finished("succeeded", AGE, batch=BATCH, after_id=after)
        if last == after:
            break
        deleted, after = deleted + count, last
    batched_s = time.perf_counter() - start
    rate = deleted / batched_s if batched_s else 0.0
    day_batched_s = in_partition / rate if rate else 0.0
    moving = move_during_drain(target, move_rows=move_rows, jobs_count=jobs_count, timeout=timeout)
    return moving | {
        "partitions_day_rows": in_partition,
        "partitions_dropped": dropped,
        "partitions_drop_s": drop_s,
        "partitions_batched_rows": deleted,
        "partitions_batched_s": batched_s,
        "partitions_batched_rows_per_s": rate,
        "partitions_day_batched_s": day_batched_s,
        "partitions_drop_vs_batched": day_batched_s / drop_s if drop_s else 0.0,
    }


def _prepare_move(target: Target, move_rows: int, jobs_count: int) -> None:
    with target.connect() as conn:
        database.reset(conn)
        conn.execute(
            sql.SQL(_FINISHED).format(table=sql.Identifier(JOB_TABLE)),
            {"name": NOOP, "day": _days_ago(conn, 3), "count": move_rows, "in_history": False},
        )
        database.seed(conn, jobs_count)
        database.vacuum_analyze(conn)


def _days_ago(conn: Any, days: int) -> dt.datetime:
    row = conn.execute("SELECT STATEMENT_TIMESTAMP() - make_interval(days => %s)", [days])
    return row.fetchone()[0]


def _new_jobs_span(target: Target, after_id: int) -> tuple[int, float]:
    with target.connect() as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT count(*), EXTRACT(EPOCH FROM max(finished_at) - min(started_at)) "
                "FROM {} WHERE id > %s AND status = 'succeeded'"
            ).format(sql.Identifier(JOB_TABLE)),
            [after_id],
        ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1] or 0.0)


def move_during_drain(
    target: Target, *, move_rows: int, jobs_count: int, timeout: float
) -> dict[str, Any]:
    """The drain alone and while ``movejobhistory`` moves ``move_rows`` old finished rows."""
    import subprocess

    argv = drain.worker_argv("--burst", batch=None, threads=None)
    env = database.environment(target)
    out: dict[str, Any] = {"partitions_move_rows": move_rows, "partitions_move_jobs": jobs_count}
    for variant in ("alone", "moving"):
        _prepare_move(target, move_rows, jobs_count)
        mover = None
        started = time.perf_counter()
        if variant == "moving":
            move_argv = database.manage("movejobhistory", "--batch", str(BATCH))
            mover = subprocess.Popen(move_argv, env=env, stdout=subprocess.PIPE, text=True)
        Group.start([argv] * 2, env).wait(timeout)
        done, span = _new_jobs_span(target, move_rows)
        if done != jobs_count:
            raise RuntimeError(f"{done} of {jobs_count} jobs succeeded ({variant})")
        out[f"partitions_drain_{variant}_per_s"] = done / span if span else 0.0
        if mover is not None:
            output, _ = mover.communicate(timeout=timeout)
            if mover.returncode:
                raise RuntimeError(f"movejobhistory failed (exit {mover.returncode})")
            moved = int(output.split("Moved ")[1].split()[0])
            seconds = time.perf_counter() - started
            out["partitions_moved"] = moved
            out["partitions_move_s"] = seconds
            out["partitions_move_rows_per_s"] = moved / seconds if seconds else 0.0
    alone = out["partitions_drain_alone_per_s"]
    out["partitions_drain_moving_vs_alone"] = (
        out["partitions_drain_moving_per_s"] / alone if alone else 0.0
    )
    return out
