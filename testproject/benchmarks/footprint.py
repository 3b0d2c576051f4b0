"""Section ``footprint``: what one primary writes and keeps per job, for the scaling guide.

Rates move with the machine; bytes do not. N no-op jobs are enqueued through the library
(``enqueue_many`` in calls of 1,000, then 1,000 more one at a time) and drained by two
``runjobworker --burst`` processes with no flags, and the database says what that cost: WAL
bytes per job for the bulk enqueue, the single enqueue and the drain (``pg_current_wal_lsn``
before and after, nothing else writing), the job table's heap and each of its indexes in bytes
per job once every job has finished, the dead row versions the drain left for vacuum, and how
long the ``VACUUM`` that reclaims them takes. Multiplied by a rate, they are what a primary
must write, keep and vacuum at that rate (docs/scaling.md).
"""

from __future__ import annotations

import time
from typing import Any

from psycopg import sql

from . import database, drain
from .database import JOB_TABLE, Target

SINGLE = 1_000
"""Jobs enqueued one at a time (each its own transaction, as a view's enqueue is)."""
CALL = 1_000
"""Jobs per ``enqueue_many`` call."""


def _lsn(raw: Any) -> int:
    row = raw.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0])


def _relation_sizes(raw: Any) -> dict[str, int]:
    """The job table's heap (``heap``: every partition's, on PostgreSQL's partitioned table)
    and each of its indexes, in bytes: an index of the partitions counted under its root."""
    rows = raw.execute(
        """
        SELECT 'heap', sum(pg_relation_size(t.relid))::bigint
        FROM pg_partition_tree(%s) AS t WHERE t.isleaf
        UNION ALL
        SELECT COALESCE(pg_partition_root(x.indexrelid), x.indexrelid)::regclass::text,
            sum(pg_relation_size(x.indexrelid))::bigint
        FROM pg_index AS x JOIN pg_partition_tree(%s) AS t ON x.indrelid = t.relid
        WHERE t.isleaf
        GROUP BY 1
        """,
        [JOB_TABLE, JOB_TABLE],
    ).fetchall()
    return {str(name): int(size) for name, size in rows}


def _dead_rows(raw: Any) -> int:
    # The statistics reach pg_stat_user_tables within a second of the workers' last commit.
    time.sleep(1.5)
    raw.execute("SELECT pg_stat_clear_snapshot()")
    row = raw.execute(
        "SELECT sum(n_dead_tup) FROM pg_stat_user_tables "
        "WHERE relid IN (SELECT relid FROM pg_partition_tree(%s) WHERE isleaf)",
        [JOB_TABLE],
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def run(target: Target, *, jobs_count: int, timeout: float) -> dict[str, Any]:
    from testapp import jobs

    bulk_count = max(jobs_count - SINGLE, CALL)
    total = bulk_count + SINGLE
    with target.connect() as raw:
        database.reset(raw)
        database.vacuum_analyze(raw)
        start = _lsn(raw)
        for first in range(0, bulk_count, CALL):
            jobs.noop.enqueue_many([((), {})] * min(CALL, bulk_count - first))
        bulk_done = _lsn(raw)
        for _ in range(SINGLE):
            jobs.noop.enqueue()
        enqueued = _lsn(raw)
        sizes_pending = _relation_sizes(raw)
    argvs = [drain.worker_argv("--burst", batch=None, threads=None)] * 2
    figures = drain.drain_jobs(target, argvs, expected=total, timeout=timeout)
    with target.connect() as raw:
        drained = _lsn(raw)
        dead = _dead_rows(raw)
        sizes = _relation_sizes(raw)
        started = time.perf_counter()
        raw.execute(sql.SQL("VACUUM {}").format(sql.Identifier(JOB_TABLE)))
        vacuum_s = time.perf_counter() - started
    heap = sizes.pop("heap")
    out: dict[str, Any] = {
        "footprint_jobs": total,
        "footprint_drain_per_s": figures["per_s"],
        "footprint_wal_bulk_enqueue_bytes_per_job": (bulk_done - start) / bulk_count,
        "footprint_wal_single_enqueue_bytes_per_job": (enqueued - bulk_done) / SINGLE,
        "footprint_wal_drain_bytes_per_job": (drained - enqueued) / total,
        "footprint_heap_pending_bytes_per_job": sizes_pending["heap"] / total,
        "footprint_heap_bytes_per_job": heap / total,
        "footprint_indexes_bytes_per_job": sum(sizes.values()) / total,
        "footprint_dead_rows_per_job": dead / total,
        "footprint_vacuum_s": vacuum_s,
    }
    for name, size in sorted(sizes.items()):
        out[f"footprint_index_{name}_bytes_per_job"] = size / total
    return out
