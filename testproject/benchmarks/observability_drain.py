"""Section ``observability``: what tracing costs a no-op drain, beside the same drain without it.

Each variant drains the same N no-op jobs with the worker's defaults, P processes, from the same
table state, timed from the first start to the last finish in database time. ``BENCHMARK_OTEL``
(benchmarks/settings.py) sets the worker processes up: ``absent`` (``opentelemetry`` cannot be
imported, as without the ``otel`` extra), ``api`` (the API, no SDK: what a project that installed
the extra and set nothing gets), ``sdk10`` and ``sdk100`` (the SDK's tracer provider sampling
10% and 100% of traces, spans through a batch processor to an in-memory exporter, metrics read
by an in-memory reader). The ratios are each variant's rate over ``absent``'s. Then jobs that
log one INFO line each, with each job's own logs off (``LEASEJOBS_JOB_LOGS = None``) and kept
(the default): ``logs_on_vs_off``. The two drains of each of the tightest ratios (``absent``
and ``api``, logs off and kept) run in mirrored order, twice each (``mirrored``). Beside them
what bounds the logs' cost, in the same run: a handler of the project's keeping each record's
fields, logs off (``logs_floor_vs_off``), and the same log rows written with nothing
captured (``logs_given_vs_off``).

Beside the rates, the CPU under them: the worker processes' CPU per job in each drain (their
start-up, timed on an empty table, taken out), what each variant added to ``absent``'s
(``added_cpu_us``), and the SDK's own calls for one attempt (the API's, for ``api``) timed in
a loop with nothing of the library around them (``calls_us``, benchmarks/sdk_calls.py). CPU
per job moves less than a rate when the machine is shared: ``logs_cpu_on_vs_off`` is the
logs' cost in CPU.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import database, drain, otel_setup
from .database import Target

SDK_CALLS = Path(__file__).resolve().parent / "sdk_calls.py"

VARIANTS = ("absent", "api", "sdk10", "sdk100")
"""Tracing's variants (``BENCHMARK_OTEL``), on no-op jobs."""

LOG_LINE = "testapp.jobs.log_line"
"""Jobs that log one INFO line each: drained with each job's own logs off, then kept."""

LOG_VARIANTS = {
    "off": (LOG_LINE, "off"),
    "on": (LOG_LINE, "on"),
    "floor": (LOG_LINE, "floor"),
    "given": ("testapp.jobs.log_row_given", "on"),
}
"""The logs' drains: the job and ``BENCHMARK_JOB_LOGS``. ``floor``: logs off, the project's
own handler on the job's logger keeping each record's fields (benchmarks/log_floor.py), the
least a capture through ``logging`` costs; ``given``: logs kept, the job makes no record and
hands its attempt the row ``on`` writes, so only the writing is paid."""


def sdk_calls_us(ratio: float | str) -> float:
    """The SDK's own calls for one attempt (or the API's, ``"api"``), in a loop in a new
    process (``sdk_calls.py``)."""
    argv = [sys.executable, str(SDK_CALLS), str(ratio)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def drained(
    target: Target, argvs: list[list[str]], jobs_count: int, env: dict[str, str], timeout: float
) -> dict[str, float]:
    """Drain ``jobs_count`` prepared jobs; the workers' CPU per job without their start-up,
    which the same processes on an empty table take (the SDK's import is part of it)."""
    figures = drain.drain_jobs(target, argvs, expected=jobs_count, timeout=timeout, env=env)
    with target.connect() as raw:
        database.reset(raw)
    idle = drain.drain_jobs(target, argvs, expected=0, timeout=timeout, env=env)
    start_up_per_job = idle["cpu_s"] / jobs_count * 1e6
    return {**figures, "cpu_us_per_job": figures["cpu_us_per_job"] - start_up_per_job}


def mirrored(
    drain_one: Callable[[str], dict[str, float]], variants: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Each variant's figures, the first two drained first, second, second, first and each the
    mean of its two drains (a machine that slows down through the run moves both alike: their
    ratio is the section's tightest target), the others once after them."""
    first, second, *rest = variants
    drains: dict[str, list[dict[str, float]]] = {variant: [] for variant in variants}
    for variant in (first, second, second, first, *rest):
        drains[variant].append(drain_one(variant))
    return {
        variant: {key: statistics.fmean(d[key] for d in done) for key in done[0]}
        for variant, done in drains.items()
    }


def run(target: Target, *, jobs_count: int, procs: Sequence[int], timeout: float) -> dict[str, Any]:
    """Drain each variant with the largest process count; rates and ratios to ``absent``."""
    p = max(procs)
    argvs = [drain.worker_argv("--burst", batch=None, threads=None)] * p
    out: dict[str, Any] = {"observability_jobs": jobs_count, "observability_procs": p}

    def traced(variant: str) -> dict[str, float]:
        drain.prepare(target, jobs_count)
        env = database.environment(target, BENCHMARK_OTEL=variant)
        return drained(target, argvs, jobs_count, env, timeout)

    def logged(variant: str) -> dict[str, float]:
        name, setting = LOG_VARIANTS[variant]
        drain.prepare(target, jobs_count, name=name)
        env = database.environment(target, BENCHMARK_JOB_LOGS=setting)
        return drained(target, argvs, jobs_count, env, timeout)

    for variant, figures in mirrored(traced, VARIANTS).items():
        out[f"observability_{variant}_per_s"] = figures["per_s"]
        out[f"observability_{variant}_cpu_us"] = figures["cpu_us_per_job"]
    calls: dict[str, float | str] = {"api": "api", **otel_setup.RATIOS}
    for variant, ratio in calls.items():
        out[f"observability_{variant}_calls_us"] = sdk_calls_us(ratio)
        added = out[f"observability_{variant}_cpu_us"] - out["observability_absent_cpu_us"]
        out[f"observability_{variant}_added_cpu_us"] = added
    for logs, figures in mirrored(logged, list(LOG_VARIANTS)).items():
        out[f"observability_logs_{logs}_per_s"] = figures["per_s"]
        out[f"observability_logs_{logs}_cpu_us"] = figures["cpu_us_per_job"]
    off = out["observability_logs_off_per_s"]
    for logs in list(LOG_VARIANTS)[1:]:
        out[f"observability_logs_{logs}_vs_off"] = out[f"observability_logs_{logs}_per_s"] / off
    out["observability_logs_cpu_on_vs_off"] = (
        out["observability_logs_on_cpu_us"] / out["observability_logs_off_cpu_us"]
    )
    absent = out["observability_absent_per_s"]
    for variant in VARIANTS[1:]:
        out[f"observability_{variant}_vs_absent"] = out[f"observability_{variant}_per_s"] / absent
    return out
