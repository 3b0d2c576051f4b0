"""Sections ``latency`` and ``spike``: how soon a due job starts, and how fast a burst drains.

Latency is ``started_at - run_at`` of each job, both written by the database clock, for jobs
enqueued one by one at random gaps while one worker idles: once with LISTEN/NOTIFY, once with
polling only. The spike enqueues N jobs all due in the same second while two workers idle, and
times the drain from that second to the last finish; RSS is sampled idle and under that load.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import statistics
import time
from typing import Any

from testapp import jobs

from django_leasejobs.db import dbtime

from . import database
from .database import Target
from .drain import worker_argv
from .processes import Group

POLL_SECONDS = 1.0


def _succeeded_after(raw: Any, after_id: int) -> int:
    row = raw.execute(
        "SELECT count(*) FROM django_leasejobs_job WHERE id > %s AND status = 'succeeded'",
        [after_id],
    ).fetchone()
    return int(row[0])


def _wait_for(raw: Any, after_id: int, count: int, timeout: float, group: Group) -> None:
    deadline = time.perf_counter() + timeout
    while _succeeded_after(raw, after_id) < count:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"fewer than {count} jobs ran within {timeout:.0f} s")
        if any(p.poll() is not None for p in group.procs):
            group.check()
            raise RuntimeError("a worker exited early")
        group.sample()
        time.sleep(0.02)


def _start_idle_workers(
    target: Target, raw: Any, count: int, notify: bool, **argv: Any
) -> tuple[Group, int]:
    """Start workers and wait until they have run a probe job each; return the last probe id."""
    env = database.environment(target, BENCHMARK_NOTIFY="1" if notify else "0")
    group = Group.start([worker_argv(poll=POLL_SECONDS, **argv)] * count, env)
    probe = 0
    for _ in range(count):
        probe = jobs.noop.enqueue().pk
    _wait_for(raw, probe - count, count, 120, group)
    time.sleep(1.0)  # let them settle into their idle wait
    return group, probe


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1)]

    return {"p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "max": ordered[-1]}


def latency(target: Target, *, samples: int, timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rng = random.Random(6)
    with target.connect() as raw:
        for mode, notify in (("notify", True), ("poll", False)):
            database.reset(raw)
            group, probe = _start_idle_workers(target, raw, 1, notify, batch=10, threads=1)
            try:
                for _ in range(samples):
                    jobs.noop.enqueue()
                    time.sleep(rng.uniform(0.01, 0.05))
                _wait_for(raw, probe, samples, timeout, group)
            finally:
                group.stop()
            seconds = [
                float(row[0])
                for row in raw.execute(
                    "SELECT EXTRACT(EPOCH FROM started_at - run_at) FROM django_leasejobs_job "
                    "WHERE id > %s",
                    [probe],
                )
            ]
            for key, value in _quantiles(seconds).items():
                out[f"latency_{mode}_{key}_ms"] = value * 1000
            out[f"latency_{mode}_mean_ms"] = statistics.fmean(seconds) * 1000
        database.reset(raw)
    return out


def spike(
    target: Target, *, jobs_count: int, batch: int, threads: int, timeout: float
) -> dict[str, Any]:
    with target.connect() as raw:
        database.reset(raw)
        group, probe = _start_idle_workers(target, raw, 2, True, batch=batch, threads=threads)
        try:
            time.sleep(2.0)
            idle_rss = max(group.sample().values(), default=0.0)
            group.peak_rss.clear()
            now = dbtime.db_now()
            lead = 2 + math.ceil(jobs_count / 20_000)  # enqueue must finish before the due second
            due = now.replace(microsecond=0) + dt.timedelta(seconds=lead)
            jobs.noop.enqueue_many([{"run_at": due}] * jobs_count)
            enqueued_before_due = dbtime.db_now() < due
            _wait_for(raw, probe, jobs_count, timeout, group)
        finally:
            group.stop()
        row = raw.execute(
            "SELECT EXTRACT(EPOCH FROM min(started_at) - %s), "
            "EXTRACT(EPOCH FROM max(finished_at) - %s) FROM django_leasejobs_job WHERE id > %s",
            [due, due, probe],
        ).fetchone()
        assert row is not None
        database.reset(raw)
    first_start, drained = float(row[0]), float(row[1])
    return {
        "spike_jobs": jobs_count,
        "spike_first_start_s": first_start,
        "spike_drain_s": drained,
        "spike_per_s": jobs_count / drained,
        "spike_enqueued_before_due": float(enqueued_before_due),
        "rss_idle_mib": idle_rss,
        "rss_load_mib": max(group.peak_rss.values(), default=0.0),
    }
