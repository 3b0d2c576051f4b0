"""The ``scale`` section's pruning: ``prunejobs`` deleting a million finished rows while a worker
claims, and the worst claim latency meanwhile.

``prunejobs`` runs as the operator runs it, in its own process; this process claims 100 jobs
(and completes them, as a worker would) every ``PACE`` seconds until it exits. The deleted rows
are written again afterwards (as finished rows of the same kind), so a database kept for
``--scale-reuse`` keeps its size.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from typing import Any

from django.db import connection

from . import database, scale, scale_fill
from .database import Target

PACE = 0.2
"""Seconds between claims: a worker's pace, slow enough not to drain the due backlog."""


def cutoff_seconds(rows: int) -> int | None:
    """The age, in whole seconds, above which about ``rows`` succeeded jobs finished."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXTRACT(EPOCH FROM STATEMENT_TIMESTAMP() - finished_at) "
            "FROM django_leasejobs_job WHERE status = %s "
            "ORDER BY finished_at OFFSET %s LIMIT 1",
            ["succeeded", rows - 1],
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def prune_under_claims(target: Target, rows: int) -> dict[str, Any]:
    """Time ``prunejobs`` over about ``rows`` finished jobs, claiming throughout."""
    age = cutoff_seconds(rows)
    if age is None:
        return {"prune_skipped": f"fewer than {rows:,} succeeded jobs"}
    argv = database.manage("prunejobs", "--succeeded-older-than", f"{age}s", "--batch", "1000")
    claims: list[float] = []
    start = time.perf_counter()
    with subprocess.Popen(
        argv, env=database.environment(target), stdout=subprocess.PIPE, text=True
    ) as pruning:
        while pruning.poll() is None:
            claims.append(scale.claim_and_complete())
            time.sleep(PACE)
        output = pruning.stdout.read() if pruning.stdout else ""
    seconds = time.perf_counter() - start
    if pruning.returncode:
        raise RuntimeError(f"prunejobs failed (exit {pruning.returncode})")
    deleted = int(output.split("deleted ")[1].split()[0]) if "deleted " in output else 0
    with target.connect() as conn:
        scale_fill.refill_finished(conn, deleted)
    return {
        "prune_rows": deleted,
        "prune_seconds": seconds,
        "prune_rows_per_s": deleted / seconds if seconds else 0.0,
        "prune_claims": len(claims),
        "prune_claim_median_ms": statistics.median(claims) if claims else 0.0,
        "prune_claim_max_ms": max(claims, default=0.0),
        "prune_claim_p99_ms": _p99(claims),
        "prune_output": output.strip(),
    }


def _p99(values: list[float]) -> float:
    if len(values) < 2:
        return max(values, default=0.0)
    return statistics.quantiles(values, n=100)[98]
