"""Section ``claim``: the cost of one claim as the backlog grows, and the plan behind it.

For each backlog size the table is topped up with due pending jobs and vacuumed, then
``protocol.claim`` takes ``reps`` batches in a row (so the dead index entries that claims leave
behind until the next vacuum are part of the figure, as in production). The statement that
claim sends is captured and run again under ``EXPLAIN (ANALYZE, BUFFERS)`` in a rolled-back
transaction: the plan must be an index scan that reads about ``batch`` rows, never a seq scan.

Then, at the largest backlog, the same claims of a backlog whose jobs all have limits: one
concurrency key of 10,000 each (limit 1), then one rate limit high enough never to throttle,
so the figure is the cost of the limits' bookkeeping, with the claimed jobs left running and
with them completed after each claim (``steady``). Each is reported beside the claim without
limits of the same backlog as a ratio (``claim_limits_*_vs_plain``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection, transaction

from django_leasejobs import protocol

from . import database
from .database import Target

PLAN_FIGURES = ("seq_scan", "sort", "scan", "rows_read", "buffers", "explain_ms", "planning_ms")
"""What ``explain`` reads of the claim's plan, each a figure of the section."""

FORMS: dict[str, list[str] | None] = {"one_queue": ["default"], "all_queues": None}

BACK_TO_PENDING = "status = 'pending', lease_owner = '', finished_at = NULL"
"""What makes claimed or finished rows pending again between measurements (and, with
``HISTORY_BACK``, a finished row leaves PostgreSQL's history partitions)."""
HISTORY_BACK = ", in_history = FALSE"


class _Captured(Exception):
    def __init__(self, sql: str, params: Any) -> None:
        self.sql, self.params = sql, params


def _capture(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
    if "UPDATE" not in sql:  # the probe for due jobs with limits runs first
        return execute(sql, params, many, context)
    raise _Captured(sql, params)


def _claim_statement(queues: list[str] | None, batch: int) -> tuple[str, Any]:
    """The SQL and parameters that ``protocol.claim`` would send, without running it."""
    try:
        with connection.execute_wrapper(_capture):
            protocol.claim("benchmark-explain", queues=queues, batch=batch)
    except _Captured as captured:
        return captured.sql, captured.params
    raise RuntimeError("protocol.claim sent no statement")


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _walk(child)


def explain(queues: list[str] | None, batch: int) -> dict[str, Any]:
    sql, params = _claim_statement(queues, batch)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        text = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    if isinstance(plan, str):  # psycopg returns JSON already decoded; be safe either way
        import json

        plan = json.loads(plan)
    top = plan[0]["Plan"]
    nodes = list(_walk(top))
    # Rows read = index entries the claimable-index scans returned or filtered, all loops (the
    # all-queues form scans once per queue); the primary-key fetch of the claimed rows is apart.
    claimable = [n for n in nodes if n.get("Index Name") == "leasejobs_claimable"]
    scans = sorted(
        {
            f"{n['Node Type']} {n.get('Index Name', '')}".strip()
            for n in nodes
            # PostgreSQL names the live partition the claim reads once the table is partitioned.
            if n.get("Relation Name") in (database.JOB_TABLE, f"{database.JOB_TABLE}_live")
            and "Scan" in n["Node Type"]
            and n.get("Index Name") != "django_leasejobs_job_pkey"
        }
    )
    return {
        "seq_scan": any(n["Node Type"] == "Seq Scan" for n in nodes),
        "sort": any(n["Node Type"] in ("Sort", "Incremental Sort") for n in nodes),
        "scan": ", ".join(scans),
        "rows_read": sum(
            (int(n.get("Actual Rows", 0)) + int(n.get("Rows Removed by Filter", 0)))
            * int(n.get("Actual Loops", 1))
            for n in claimable
        ),
        "buffers": int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0)),
        "explain_ms": float(plan[0].get("Execution Time", 0.0)),
        "planning_ms": float(plan[0].get("Planning Time", 0.0)),
        "plan": text,
    }


def _pending(raw: Any) -> int:
    row = raw.execute(
        "SELECT count(*) FROM django_leasejobs_job WHERE status = 'pending'"
    ).fetchone()
    return int(row[0])


def run(target: Target, *, backlogs: list[int], batch: int, reps: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with target.connect() as raw:
        database.reset(raw)
        for backlog in backlogs:
            label = _label(backlog)
            for form, queues in FORMS.items():
                missing = backlog - _pending(raw)
                if missing > 0:
                    database.seed(raw, missing)
                database.vacuum_analyze(raw)
                plan = explain(queues, batch)
                times = _timed_claims(raw, queues, batch, reps)
                prefix = f"claim_{form}_{label}"
                out[f"{prefix}_ms"] = statistics.median(times) * 1000
                out[f"{prefix}_p95_ms"] = _quantile(times, 0.95) * 1000
                for key in PLAN_FIGURES:
                    out[f"{prefix}_{key}"] = plan[key]
                out[f"{prefix}_plan"] = plan["plan"]
        out.update(_limited(raw, backlogs[-1], batch, reps))
        out.update(_spread(raw, backlogs[-1], batch, reps))
        database.reset(raw)
    first, last = _label(backlogs[0]), _label(backlogs[-1])
    for form in FORMS:
        out[f"claim_{form}_growth"] = (
            out[f"claim_{form}_{last}_ms"] / out[f"claim_{form}_{first}_ms"]
        )
        for limit in LIMITS:
            for mode in ("", "steady_"):
                out[f"claim_limits_{limit}_{mode}{form}_vs_plain"] = (
                    out[f"claim_limits_{limit}_{mode}{form}_{last}_ms"]
                    / out[f"claim_{form}_{last}_ms"]
                )
    return out


def _timed_claims(raw: Any, queues: list[str] | None, batch: int, reps: int) -> list[float]:
    """Seconds of ``reps`` claims of ``batch`` in a row; then the claimed rows go back to
    pending (and out of the next measurement's way)."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        claimed = protocol.claim("benchmark", queues=queues, batch=batch)
        times.append(time.perf_counter() - start)
        assert len(claimed) == batch, (len(claimed), batch)
    raw.execute(f"UPDATE django_leasejobs_job SET {BACK_TO_PENDING} WHERE status = 'running'")
    return times


LIMITS: dict[str, str] = {
    # 10,000 concurrency keys, limit 1, spread over the backlog in no particular order.
    "keys": "concurrency_key = 'customer:' || (hashtext(id::text) & 16383) % 10000, "
    "concurrency_limit = 1",
    # One rate key whose limit is never reached: the bucket is read and written every claim.
    "rate": "rate_key = 'api', rate_limit = 1000000000, rate_period = 60",
}


def _limited(raw: Any, backlog: int, batch: int, reps: int) -> dict[str, Any]:
    """Claims of ``backlog`` due jobs that all have limits (``LIMITS``), timed as above.

    Each is timed twice: claims in a row whose jobs stay running (with limit 1, every claim
    fills a hundred more of the 10,000 keys, and the next claims read past the backlog of the
    full keys), and claims each followed by the completion of its jobs (not timed), as a
    worker finishing its batch leaves them (``steady``).
    """
    out: dict[str, Any] = {}
    back = BACK_TO_PENDING + (HISTORY_BACK if database.has_history(raw) else "")
    label = _label(backlog)
    for limit, assignment in LIMITS.items():
        for mode in ("", "steady_"):
            raw.execute(
                f"UPDATE django_leasejobs_job SET {back}, "
                "concurrency_key = NULL, concurrency_limit = NULL, rate_key = NULL, "
                "rate_limit = NULL, rate_period = NULL"
            )
            raw.execute("DELETE FROM django_leasejobs_limiter")
            raw.execute(f"UPDATE django_leasejobs_job SET {assignment}")  # constant SQL of LIMITS
            database.vacuum_analyze(raw)
            for form, queues in FORMS.items():
                times = []
                for _ in range(reps):
                    start = time.perf_counter()
                    claimed = protocol.claim("benchmark", queues=queues, batch=batch)
                    times.append(time.perf_counter() - start)
                    assert len(claimed) == batch, (limit, len(claimed), batch)
                    if mode:
                        protocol.complete_many([(job.pk, job.attempt) for job in claimed])
                raw.execute(
                    f"UPDATE django_leasejobs_job SET {back} "
                    "WHERE status IN ('running', 'succeeded')"
                )
                raw.execute("UPDATE django_leasejobs_limiter SET started = 0, blocked_until = NULL")
                prefix = f"claim_limits_{limit}_{mode}{form}_{label}"
                out[f"{prefix}_ms"] = statistics.median(times) * 1000
                out[f"{prefix}_p95_ms"] = _quantile(times, 0.95) * 1000
    raw.execute(
        "UPDATE django_leasejobs_job SET concurrency_key = NULL, concurrency_limit = NULL, "
        "rate_key = NULL, rate_limit = NULL, rate_period = NULL"
    )
    return out


SPREAD = 20
"""Queues the backlog is spread over for the every-queue claim's own measurement."""


def _spread(raw: Any, backlog: int, batch: int, reps: int) -> dict[str, Any]:
    """``backlog`` due jobs spread evenly over ``SPREAD`` queues: the claim of one of them
    (``--queues q00``) against the claim of every queue (a worker with no ``--queues``),
    timed as above, and their ratio (``claim_spread_all_vs_one``)."""
    database.reset(raw)
    per_queue = max(backlog // SPREAD, batch * reps)  # enough for every claim of one queue
    for n in range(SPREAD):
        database.seed(raw, per_queue, queue=f"q{n:02}")
    database.vacuum_analyze(raw)
    out: dict[str, Any] = {}
    label = _label(backlog)
    for form, queues in {"one_queue": ["q00"], "all_queues": None}.items():
        times = _timed_claims(raw, queues, batch, reps)
        out[f"claim_spread_{form}_{label}_ms"] = statistics.median(times) * 1000
    out["claim_spread_all_vs_one"] = (
        out[f"claim_spread_all_queues_{label}_ms"] / out[f"claim_spread_one_queue_{label}_ms"]
    )
    return out


def _label(count: int) -> str:
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    if count >= 1000 and count % 1000 == 0:
        return f"{count // 1000}k"
    return str(count)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
