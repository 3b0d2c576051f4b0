"""Section ``limits``: draining a backlog whose jobs all have limits, beside the same backlog
without (issue #18: within 20%).

The backlog is N due no-op jobs over 1,000 keys (``id % 1000``, so every key has jobs at every
point of the drain). ``keys`` gives each job the concurrency key of its customer with a limit of
2, more slots than the workers have threads, so the figure is the cost of the limited claim
(lock the keys, count their running jobs) and not of waiting for slots; ``rate`` gives each a
rate key of its customer with a rate never reached, so every claim reads and writes the
buckets. Each variant starts from the same table state and is timed as every drain is (first
start to last finish, database time), by ``runjobworker --burst`` processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import database, drain
from .database import Target

VARIANTS: dict[str, str | None] = {
    "plain": None,
    "keys": "concurrency_key = 'customer:' || (id % 1000), concurrency_limit = 2",
    "rate": "rate_key = 'customer:' || (id % 1000), rate_limit = 1000000000, rate_period = 60",
}
"""Each variant's limit columns, as constant SQL (no value from outside)."""


def _prepare(target: Target, jobs_count: int, assignment: str | None) -> None:
    with target.connect() as raw:
        database.reset(raw)
        database.seed(raw, jobs_count)
        if assignment is not None:
            raw.execute(f"UPDATE django_leasejobs_job SET {assignment}")  # constant SQL
        database.vacuum_analyze(raw)


def run(
    target: Target,
    *,
    jobs_count: int,
    procs: Sequence[int],
    batch: int,
    threads: int,
    timeout: float,
) -> dict[str, Any]:
    """Drain each variant with 1..P processes; rates and ratios to ``plain`` per count."""
    argv = drain.worker_argv("--burst", batch=batch, threads=threads)
    out: dict[str, Any] = {
        "limits_jobs": jobs_count,
        "limits_batch": batch,
        "limits_threads": threads,
    }
    for p in procs:
        for variant, assignment in VARIANTS.items():
            _prepare(target, jobs_count, assignment)
            figures = drain.drain_jobs(target, [argv] * p, expected=jobs_count, timeout=timeout)
            for key, value in figures.items():
                out[f"limits_p{p}_{variant}_{key}"] = value
        plain = out[f"limits_p{p}_plain_per_s"]
        for variant in VARIANTS:
            if variant != "plain":
                out[f"limits_p{p}_{variant}_vs_plain"] = out[f"limits_p{p}_{variant}_per_s"] / plain
    return out
