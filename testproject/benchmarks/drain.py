"""Sections ``ceiling``, ``peer``, ``loop`` and ``worker``: N no-op jobs drained by processes.

Every variant starts from the same table state (N due jobs, vacuumed and analysed) and is timed
the same way: from the first job's start to the last job's finish, in database time, read from
the rows themselves. Process start-up (Django's import time) is therefore left out of every
figure alike; the wall time including it is reported beside it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import database
from .database import JOB_TABLE, Target
from .processes import Group

PEER_TABLE = "django_tasks_database_dbtaskresult"
RAW_WORKER = str(Path(__file__).resolve().parent / "raw_worker.py")


def _drain(
    target: Target, argvs: Sequence[Sequence[str]], *, expected: int, table: str, timeout: float
) -> dict[str, float]:
    group = Group.start(argvs, database.environment(target))
    wall = group.wait(timeout)
    with target.connect() as raw:
        count, span = database.drain_span(raw, table)
    if count != expected:
        raise RuntimeError(f"{count} of {expected} jobs succeeded in {table}")
    return {
        "per_s": count / span if span else float("nan"),
        "wall_s": wall,
        "rss_mib": max(group.peak_rss.values(), default=0.0),
    }


def _prepare(target: Target, jobs_count: int) -> None:
    with target.connect() as raw:
        database.reset(raw)
        database.seed(raw, jobs_count)
        database.vacuum_analyze(raw)


def _record(out: dict[str, Any], prefix: str, figures: dict[str, float]) -> None:
    for key, value in figures.items():
        out[f"{prefix}_{key}"] = value


def _best_of_grid(
    target: Target,
    section: str,
    *,
    jobs_count: int,
    procs: Sequence[int],
    variants: Sequence[tuple[str, Callable[[int], Sequence[Sequence[str]]]]],
    timeout: float,
) -> dict[str, Any]:
    """Drain the same N jobs once per (process count, variant); record each and the best.

    ``variants`` are (label, argvs for P processes); figures land under
    ``<section>_p<P>_<label>_*`` and the best rate under ``<section>_p<P>_per_s``.
    """
    out: dict[str, Any] = {}
    for p in procs:
        best = 0.0
        for label, argvs in variants:
            _prepare(target, jobs_count)
            figures = _drain(
                target, argvs(p), expected=jobs_count, table=JOB_TABLE, timeout=timeout
            )
            _record(out, f"{section}_p{p}_{label}", figures)
            best = max(best, figures["per_s"])
        out[f"{section}_p{p}_per_s"] = best
    return out


def ceiling(
    target: Target, *, jobs_count: int, procs: Sequence[int], batches: Sequence[int], timeout: float
) -> dict[str, Any]:
    """psycopg alone: SKIP LOCKED batch claim + one grouped fenced completion per batch."""

    def raw_workers(batch: int) -> Callable[[int], list[list[str]]]:
        return lambda p: [
            [sys.executable, RAW_WORKER, target.conninfo, str(batch), f"raw-{i}"] for i in range(p)
        ]

    variants = [(f"b{batch}", raw_workers(batch)) for batch in batches]
    return _best_of_grid(
        target, "ceiling", jobs_count=jobs_count, procs=procs, variants=variants, timeout=timeout
    )


def peer(
    target: Target, *, jobs_count: int, procs: Sequence[int], timeout: float
) -> dict[str, Any]:
    """django-tasks' database backend worker (``db_worker --batch``) on the same no-op load."""
    from django_tasks_db.models import DBTaskResult, get_date_max  # the benchmark extra

    from . import peer_tasks

    out: dict[str, Any] = {}
    for p in procs:
        with target.connect() as raw:
            database.reset(raw)
        rows: list[Any] = [
            DBTaskResult(
                args_kwargs={"args": [], "kwargs": {}},
                task_path=peer_tasks.noop.module_path,
                queue_name="default",
                backend_name="default",
                run_after=get_date_max(),
                exception_class_path="",
                traceback="",
            )
            for _ in range(jobs_count)
        ]
        DBTaskResult.objects.bulk_create(rows, batch_size=1000)
        with target.connect() as raw:
            database.vacuum_analyze(raw, PEER_TABLE)
        argv = database.manage(
            "db_worker",
            "--batch",
            "--no-startup-delay",
            "--no-reload",
            "--verbosity",
            "0",
            "--interval",
            "0",
        )
        figures = _drain(target, [argv] * p, expected=jobs_count, table=PEER_TABLE, timeout=timeout)
        _record(out, f"peer_p{p}", figures)
    return out


def loop(
    target: Target, *, jobs_count: int, procs: Sequence[int], batches: Sequence[int], timeout: float
) -> dict[str, Any]:
    """The library's own path without the worker: protocol.claim, execute, complete_many."""

    def loop_workers(batch: int) -> Callable[[int], list[list[str]]]:
        argv = database.manage("benchmark_part", "loop-worker", "--batch", str(batch))
        return lambda p: [argv] * p

    variants = [(f"b{batch}", loop_workers(batch)) for batch in batches]
    return _best_of_grid(
        target, "loop", jobs_count=jobs_count, procs=procs, variants=variants, timeout=timeout
    )


def worker(
    target: Target,
    *,
    jobs_count: int,
    procs: Sequence[int],
    batches: Sequence[int],
    threads: Sequence[int],
    timeout: float,
) -> dict[str, Any]:
    """``runjobworker --burst`` over process counts, batch sizes and thread counts."""

    def workers(batch: int, t: int) -> Callable[[int], list[list[str]]]:
        argv = worker_argv("--burst", batch=batch, threads=t)
        return lambda p: [argv] * p

    variants = [(f"b{b}_t{t}", workers(b, t)) for b in batches for t in threads]
    return _best_of_grid(
        target, "worker", jobs_count=jobs_count, procs=procs, variants=variants, timeout=timeout
    )


def worker_argv(*extra: str, batch: int, threads: int, poll: float | None = None) -> list[str]:
    args = ["runjobworker", "--batch", str(batch), "--concurrency", str(threads), "--no-scheduler"]
    if poll is not None:
        args += ["--poll", str(poll)]
    return database.manage(*args, *extra)
