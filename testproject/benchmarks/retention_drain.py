"""Section ``retention``: draining a backlog while the workers prune old succeeded rows by
``LEASEJOBS_RETENTION``, beside the same drain without retention (target: within 10%).

The table holds ``retention_rows`` succeeded jobs that finished 30 days ago (ids 1..R) and N due
no-op jobs after them. ``plain`` drains with no retention setting; ``pruning`` drains with
``LEASEJOBS_RETENTION = {"succeeded": "7d"}``, so the worker holding the retention lease prunes
the old rows in its maintenance ticks while all of them claim. Each variant starts from the
same table state; the drain is timed over the new jobs only (first start to last finish,
database time), and the old rows pruned meanwhile are counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg import sql

from . import database, drain
from .database import JOB_TABLE, Target

VARIANTS: dict[str, dict[str, str]] = {
    "plain": {},
    "pruning": {"succeeded": "7d"},
}
"""Each variant's ``LEASEJOBS_RETENTION``."""


def _seed_finished(conn: Any, count: int) -> None:
    """``count`` succeeded no-op jobs that finished 30 days ago, as a worker leaves them (in
    the history, where the table has one: past its partitions, so pruned row by row)."""
    history = database.has_history(conn)
    conn.execute(
        sql.SQL(
            """
            INSERT INTO {table} (name, args, kwargs, queue, priority, status, run_at, attempt,
                released, max_attempts, lease_owner, created_at, started_at, finished_at,
                last_error, errors, finished_by, task_backend{column})
            SELECT %s, '[]', '{{}}', 'default', 0, 'succeeded', t, 1, 0, 5, '', t, t, t,
                '', '[]', '', ''{value}
            FROM (SELECT STATEMENT_TIMESTAMP() - INTERVAL '30 days' AS t) AS old,
                generate_series(1, %s)
            """
        ).format(
            table=sql.Identifier(JOB_TABLE),
            column=sql.SQL(", in_history" if history else ""),
            value=sql.SQL(", TRUE" if history else ""),
        ),
        [database.NOOP, count],
    )


def _prepare(target: Target, old_rows: int, jobs_count: int) -> None:
    with target.connect() as raw:
        database.reset(raw)
        _seed_finished(raw, old_rows)
        database.seed(raw, jobs_count)
        database.vacuum_analyze(raw)


def _new_span(target: Target, old_rows: int) -> tuple[int, float, int]:
    """(new jobs succeeded, seconds from their first start to their last finish, old rows
    still there)."""
    with target.connect() as raw:
        row = raw.execute(
            sql.SQL(
                "SELECT count(*) FILTER (WHERE id > %s), "
                "EXTRACT(EPOCH FROM max(finished_at) FILTER (WHERE id > %s) "
                "- min(started_at) FILTER (WHERE id > %s)), "
                "count(*) FILTER (WHERE id <= %s) FROM {} WHERE status = 'succeeded'"
            ).format(sql.Identifier(JOB_TABLE)),
            [old_rows, old_rows, old_rows, old_rows],
        ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1] or 0.0), int(row[2])


def run(
    target: Target,
    *,
    jobs_count: int,
    old_rows: int,
    procs: Sequence[int],
    batch: int,
    threads: int,
    timeout: float,
) -> dict[str, Any]:
    """Drain each variant with P processes; rates, rows pruned, and the ratio to ``plain``."""
    argv = drain.worker_argv("--burst", batch=batch, threads=threads)
    out: dict[str, Any] = {
        "retention_jobs": jobs_count,
        "retention_rows": old_rows,
        "retention_batch": batch,
        "retention_threads": threads,
    }
    for p in procs:
        for variant, retention in VARIANTS.items():
            _prepare(target, old_rows, jobs_count)
            env = database.environment(target, BENCHMARK_RETENTION=json.dumps(retention))
            group = drain.Group.start([argv] * p, env)
            wall = group.wait(timeout)
            done, span, left = _new_span(target, old_rows)
            if done != jobs_count:
                raise RuntimeError(f"{done} of {jobs_count} jobs succeeded ({variant})")
            prefix = f"retention_p{p}_{variant}"
            out[f"{prefix}_per_s"] = done / span if span else float("nan")
            out[f"{prefix}_wall_s"] = wall
            out[f"{prefix}_pruned"] = old_rows - left
            out[f"{prefix}_pruned_per_s"] = (old_rows - left) / wall if wall else float("nan")
        plain = out[f"retention_p{p}_plain_per_s"]
        out[f"retention_p{p}_pruning_vs_plain"] = out[f"retention_p{p}_pruning_per_s"] / plain
    return out
