"""Section ``partitions``: retention of one day of finished jobs on PostgreSQL, the history
partition dropped whole against the same rows deleted in keyed batches.

The table gets ``--history-rows`` succeeded jobs that finished within one day three days ago,
in that day's history partition (written as a finish writes them), and ``--batched-rows``
more of the same age as an unpartitioned table holds them (in the live partition, where
retention deletes row by row). Then, in this process and one after the other, what retention
does with an age of two days: ``upkeep.drop_expired`` (the partition, whatever its size) and
the batched walk over the other rows (``upkeep.prune_finished``, batches of 1,000, the
``prunejobs`` default). The batched rate gives what the same day would cost row by row.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from psycopg import sql

from . import database
from .database import JOB_TABLE, NOOP, Target

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
            history.make_since(cursor, day, now, dt.timedelta(days=1))
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


def run(target: Target, *, rows: int, batched_rows: int) -> dict[str, Any]:
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
    return {
        "partitions_day_rows": in_partition,
        "partitions_dropped": dropped,
        "partitions_drop_s": drop_s,
        "partitions_batched_rows": deleted,
        "partitions_batched_s": batched_s,
        "partitions_batched_rows_per_s": rate,
        "partitions_day_batched_s": day_batched_s,
        "partitions_drop_vs_batched": day_batched_s / drop_s if drop_s else 0.0,
    }
