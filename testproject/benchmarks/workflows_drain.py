"""Section ``workflows``: the figures of the workflows issue, on PostgreSQL.

1. A plain drain of N no-op jobs, then a group of N no-op members with a callback, drained by
   the same workers: the group's members drain at ``workflows_group_ratio`` of the plain rate
   (target >= 0.8), and the callback starts ``workflows_callback_delay_s`` after the last
   member's end (target <= 1 s).
2. A chain of S no-op steps drained by one worker: each step's start after its parent's end,
   ``workflows_chain_gap_p50_ms`` / ``_p99_ms`` (target p99 <= 50 ms: the NOTIFY path).

Rates and gaps are read from the rows in database time, as every drain figure is: process
start-up is left out. The runs are enqueued in this process (``benchmark_part`` talks to the
scratch database), the workers are ``runjobworker --burst`` subprocesses.
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

from . import database
from .database import Target
from .drain import _drain, _record, prepare, worker_argv


def _reset(target: Target) -> None:
    with target.connect() as raw:
        database.reset(raw)


def _analyze(target: Target) -> None:
    with target.connect() as raw:
        database.vacuum_analyze(raw)


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def group_figures(
    target: Target, *, jobs_count: int, argvs: list[list[str]], timeout: float
) -> dict[str, float]:
    from django.db.models import Max, Min
    from testapp import jobs

    from django_leasejobs import group
    from django_leasejobs.models import Job, WorkflowStep

    _reset(target)
    run = group(jobs.noop.si() for _ in range(jobs_count)).then(jobs.noop.si()).enqueue()
    _analyze(target)
    figures = _drain(
        target, argvs, expected=jobs_count + 1, table=database.JOB_TABLE, timeout=timeout
    )
    steps = WorkflowStep.objects.filter(run_id=run.pk)
    callback = steps.order_by("-id").values_list("job_id", flat=True).first()
    assert callback is not None, "the callback step has no job: the run did not finish"
    members = Job.objects.filter(workflow_step__run_id=run.pk).exclude(pk=callback)
    span = members.aggregate(first=Min("started_at"), last=Max("finished_at"))
    started = Job.objects.values_list("started_at", flat=True).get(pk=callback)
    assert started is not None
    seconds = (span["last"] - span["first"]).total_seconds()
    return {
        "per_s": jobs_count / seconds if seconds else float("nan"),
        "wall_s": figures["wall_s"],
        "callback_delay_s": (started - span["last"]).total_seconds(),
    }


def chain_figures(
    target: Target, *, steps_count: int, argv: list[str], timeout: float
) -> dict[str, float]:
    from testapp import jobs

    from django_leasejobs import chain
    from django_leasejobs.models import Job

    _reset(target)
    run = chain(*(jobs.noop.si() for _ in range(steps_count))).enqueue()
    _analyze(target)
    _drain(target, [argv], expected=steps_count, table=database.JOB_TABLE, timeout=timeout)
    rows = list(
        Job.objects.filter(workflow_step__run_id=run.pk)
        .order_by("workflow_step_id")
        .values_list("started_at", "finished_at")
    )
    gaps = [
        (start - parent_end).total_seconds() * 1000
        for (_, parent_end), (start, _) in itertools.pairwise(rows)
        if start is not None and parent_end is not None
    ]
    return {
        "gap_p50_ms": statistics.median(gaps),
        "gap_p99_ms": _percentile(gaps, 0.99),
        "gap_max_ms": max(gaps),
    }


def run(
    target: Target,
    *,
    jobs_count: int,
    procs: int,
    batch: int | None,
    threads: int | None,
    chain_steps: int,
    timeout: float,
) -> dict[str, Any]:
    argv = worker_argv("--burst", batch=batch, threads=threads)
    out: dict[str, Any] = {}
    prepare(target, jobs_count)
    plain = _drain(
        target, [argv] * procs, expected=jobs_count, table=database.JOB_TABLE, timeout=timeout
    )
    _record(out, "workflows_plain", plain)
    grouped = group_figures(target, jobs_count=jobs_count, argvs=[argv] * procs, timeout=timeout)
    _record(out, "workflows_group", grouped)
    out["workflows_group_ratio"] = grouped["per_s"] / plain["per_s"]
    out["workflows_callback_delay_s"] = grouped["callback_delay_s"]
    chained = chain_figures(target, steps_count=chain_steps, argv=argv, timeout=timeout)
    _record(out, "workflows_chain", chained)
    return out
