"""Section ``observability``: what tracing costs a no-op drain, beside the same drain without it.

Each variant drains the same N no-op jobs with the worker's defaults, P processes, from the same
table state, timed from the first start to the last finish in database time. ``BENCHMARK_OTEL``
(benchmarks/settings.py) sets the worker processes up: ``absent`` (``opentelemetry`` cannot be
imported, as without the ``otel`` extra), ``api`` (the API, no SDK: what a project that installed
the extra and set nothing gets), ``sdk10`` and ``sdk100`` (the SDK's tracer provider sampling
10% and 100% of traces, spans through a batch processor to an in-memory exporter, metrics read
by an in-memory reader). The ratios are each variant's rate over ``absent``'s. Then jobs that
log one INFO line each, with each job's own logs off (``LEASEJOBS_JOB_LOGS = None``) and kept
(the default): ``logs_on_vs_off``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import database, drain
from .database import Target

VARIANTS = ("absent", "api", "sdk10", "sdk100")
"""Tracing's variants (``BENCHMARK_OTEL``), on no-op jobs."""

LOG_LINE = "testapp.jobs.log_line"
"""Jobs that log one INFO line each: drained with each job's own logs off, then kept."""


def run(target: Target, *, jobs_count: int, procs: Sequence[int], timeout: float) -> dict[str, Any]:
    """Drain each variant with the largest process count; rates and ratios to ``absent``."""
    p = max(procs)
    argv = drain.worker_argv("--burst", batch=None, threads=None)
    out: dict[str, Any] = {"observability_jobs": jobs_count, "observability_procs": p}
    for variant in VARIANTS:
        drain.prepare(target, jobs_count)
        env = database.environment(target, BENCHMARK_OTEL=variant)
        figures = drain.drain_jobs(
            target, [argv] * p, expected=jobs_count, timeout=timeout, env=env
        )
        out[f"observability_{variant}_per_s"] = figures["per_s"]
    for logs in ("off", "on"):
        drain.prepare(target, jobs_count, name=LOG_LINE)
        env = database.environment(target, BENCHMARK_JOB_LOGS=logs)
        figures = drain.drain_jobs(
            target, [argv] * p, expected=jobs_count, timeout=timeout, env=env
        )
        out[f"observability_logs_{logs}_per_s"] = figures["per_s"]
    out["observability_logs_on_vs_off"] = (
        out["observability_logs_on_per_s"] / out["observability_logs_off_per_s"]
    )
    absent = out["observability_absent_per_s"]
    for variant in VARIANTS[1:]:
        out[f"observability_{variant}_vs_absent"] = out[f"observability_{variant}_per_s"] / absent
    return out
