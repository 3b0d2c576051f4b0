"""Sections ``ceiling``, ``peer``, ``pgqueuer``, ``loop``, ``worker``: N jobs drained by processes;
``async``: N jobs that each await ``asyncio.sleep(1)``, drained by one process.

Every variant starts from the same table state (N due jobs, vacuumed and analysed) and is timed
the same way: from the first job's start to the last job's finish, in database time, read from
the rows themselves. Process start-up (Django's import time) is therefore left out of every
figure alike; the wall time including it is reported beside it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import database
from .database import JOB_TABLE, Target
from .processes import Group

PEER_TABLE = "django_tasks_database_dbtaskresult"
NAP = "testapp.jobs.nap"
"""An ``async def`` job awaiting ``asyncio.sleep(1)`` (its default; the seeded rows pass none)."""
RAW_WORKER = str(Path(__file__).resolve().parent / "raw_worker.py")
PGQUEUER_WORKER = str(Path(__file__).resolve().parent / "pgqueuer_worker.py")
SMALL_RESULT = "testapp.jobs.small_result"


def _drain(
    target: Target,
    argvs: Sequence[Sequence[str]],
    *,
    expected: int,
    table: str,
    timeout: float,
    env: dict[str, str] | None = None,
) -> dict[str, float]:
    cpu_before = children_cpu()
    group = Group.start(argvs, env or database.environment(target))
    wall = group.wait(timeout)
    cpu = children_cpu() - cpu_before
    with target.connect() as raw:
        count, span = database.drain_span(raw, table)
    if count != expected:
        raise RuntimeError(f"{count} of {expected} jobs succeeded in {table}")
    return {
        "per_s": count / span if span else float("nan"),
        "wall_s": wall,
        "rss_mib": max(group.peak_rss.values(), default=0.0),
        "cpu_s": cpu,
        "cpu_us_per_job": cpu / count * 1e6 if count else float("nan"),
    }


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's children that have ended: around a
    group's run, the worker processes' own, their start-up included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def drain_jobs(
    target: Target,
    argvs: Sequence[Sequence[str]],
    *,
    expected: int,
    timeout: float,
    env: dict[str, str] | None = None,
) -> dict[str, float]:
    """Start the processes (in ``env``, default the scratch database's), wait for them, and
    time the drain of the job table."""
    return _drain(target, argvs, expected=expected, table=JOB_TABLE, timeout=timeout, env=env)


SPREAD_QUEUES = 20
"""The worker section's spread drain: the jobs dealt over this many queues."""


def prepare(target: Target, jobs_count: int, name: str = database.NOOP, *, queues: int = 1) -> None:
    """N due jobs in the queue ``default``, or dealt evenly over ``queues`` queues."""
    with target.connect() as raw:
        database.reset(raw)
        if queues == 1:
            database.seed(raw, jobs_count, name=name)
        else:
            for index in range(queues):
                share = jobs_count // queues + (index < jobs_count % queues)
                database.seed(raw, share, name=name, queue=f"q{index}")
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
            prepare(target, jobs_count)
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
    """``runjobworker --burst`` as a user starts it, with ``--concurrency 32`` alone, and over
    the grid of batch sizes and thread counts; the defaults again on jobs returning a value.

    A worker with no ``--queues`` serves every queue: beside it, the same drain by workers
    given the one queue that holds the jobs (``defaults_queue``), and by default workers with
    the jobs dealt over 20 queues (``defaults_spread``), so that a claim shape slower than
    another, or one that two processes cannot share, shows as a ratio.

    Every drain has Django's default connection settings (``benchmarks.settings``). The
    defaults are also drained with ``CONN_MAX_AGE = 60`` (``defaults_age60``) and with the
    settings ``startproject`` writes (``defaults_startproject``: DEBUG on, no LOGGING), just
    before the same drain with the defaults, so they alternate run after run: the worker keeps
    its connections whatever ``CONN_MAX_AGE`` says, and the ratio shows what that leaves.
    """
    defaults = database.manage("runjobworker", "--burst", "--no-scheduler")
    c32 = database.manage("runjobworker", "--burst", "--no-scheduler", "--concurrency", "32")

    def workers(batch: int, t: int) -> Callable[[int], list[list[str]]]:
        argv = worker_argv("--burst", batch=batch, threads=t)
        return lambda p: [argv] * p

    one_queue = database.manage("runjobworker", "--burst", "--no-scheduler", "--queues", "default")
    variants = [
        ("defaults", lambda p: [defaults] * p),
        ("defaults_queue", lambda p: [one_queue] * p),
        ("c32", lambda p: [c32] * p),
        *((f"b{b}_t{t}", workers(b, t)) for b in batches for t in threads),
    ]
    out: dict[str, Any] = {}
    settings_variants = {
        "defaults_age60": {"BENCHMARK_CONN_MAX_AGE": "60"},
        "defaults_startproject": {"BENCHMARK_STARTPROJECT": "1"},
    }
    for p in procs:  # not among the variants: the best figure is one with the user's settings
        for label, extra in settings_variants.items():
            prepare(target, jobs_count)
            env = database.environment(target, **extra)
            figures = _drain(
                target,
                [defaults] * p,
                expected=jobs_count,
                table=JOB_TABLE,
                timeout=timeout,
                env=env,
            )
            _record(out, f"worker_p{p}_{label}", figures)
    out.update(
        _best_of_grid(
            target, "worker", jobs_count=jobs_count, procs=procs, variants=variants, timeout=timeout
        )
    )
    for p in procs:
        prepare(target, jobs_count, queues=SPREAD_QUEUES)
        figures = _drain(
            target, [defaults] * p, expected=jobs_count, table=JOB_TABLE, timeout=timeout
        )
        _record(out, f"worker_p{p}_defaults_spread", figures)
    for p in procs:
        # The no-op drain again just before: the ratio compares two neighbouring drains, as
        # the settings variants do, not the first variant of the section with its last.
        for label, name in (
            ("defaults_beside_result", database.NOOP),
            ("defaults_result", SMALL_RESULT),
        ):
            prepare(target, jobs_count, name=name)
            figures = _drain(
                target, [defaults] * p, expected=jobs_count, table=JOB_TABLE, timeout=timeout
            )
            _record(out, f"worker_p{p}_{label}", figures)
    return out


def pgqueuer(
    target: Target, *, jobs_count: int, procs: Sequence[int], timeout: float
) -> dict[str, Any]:
    """PgQueuer 1.6 (asyncpg) in drain mode: its default batch of 10, and batches of 100."""
    script = [sys.executable, PGQUEUER_WORKER]
    dsn = target.url
    out: dict[str, Any] = {}
    for p in procs:
        for batch in (10, 100):
            subprocess.run([*script, "seed", dsn, str(jobs_count)], check=True, timeout=timeout)
            group = Group.start([[*script, "drain", dsn, str(batch)]] * p, dict(os.environ))
            wall = group.wait(timeout)
            spanned = subprocess.run(
                [*script, "span", dsn], check=True, capture_output=True, text=True, timeout=60
            ).stdout.split()
            count, seconds = int(spanned[0]), float(spanned[1])
            if count != jobs_count:
                raise RuntimeError(f"{count} of {jobs_count} PgQueuer jobs succeeded")
            _record(
                out,
                f"pgqueuer_p{p}_b{batch}",
                {
                    "per_s": count / seconds if seconds else float("nan"),
                    "wall_s": wall,
                    "rss_mib": max(group.peak_rss.values(), default=0.0),
                },
            )
    subprocess.run([*script, "uninstall", dsn], check=True, timeout=60)
    return out


def async_sleep(
    target: Target, *, jobs_count: int, async_concurrency: int, timeout: float
) -> dict[str, Any]:
    """One ``runjobworker --burst --async-concurrency C`` process, N one-second async sleeps.

    Every other flag is left at its default. ``N / C`` seconds is the floor: that many waves of
    one-second sleeps, one after the other; the figure shows what the worker adds to it.
    """
    with target.connect() as raw:
        database.reset(raw)
        database.seed(raw, jobs_count, name=NAP)
        database.vacuum_analyze(raw)
    argv = database.manage(
        "runjobworker", "--burst", "--no-scheduler", "--async-concurrency", str(async_concurrency)
    )
    figures = _drain(target, [argv], expected=jobs_count, table=JOB_TABLE, timeout=timeout)
    out: dict[str, Any] = {}
    _record(out, "async_p1", figures)
    out["async_drain_s"] = jobs_count / figures["per_s"]
    out["async_floor_s"] = jobs_count / async_concurrency
    return out


def worker_argv(
    *extra: str, batch: int | None, threads: int | None, poll: float | None = None
) -> list[str]:
    """``runjobworker`` with the given batch and threads (None: the worker's own default)."""
    args = ["runjobworker", "--no-scheduler"]
    if batch is not None:
        args += ["--batch", str(batch)]
    if threads is not None:
        args += ["--concurrency", str(threads)]
    if poll is not None:
        args += ["--poll", str(poll)]
    return database.manage(*args, *extra)
