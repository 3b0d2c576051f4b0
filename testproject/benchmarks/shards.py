"""Section ``shards``: the same N no-op jobs drained from one queue database by two worker
processes (``one``), and split over two queue databases on the same server, one worker process
per database (``two``), with what must hold after each drain checked and printed.

Half the jobs are in the queue ``default``, half in ``reports``, enqueued by the library
(``enqueue_many``) so that the routing is exercised: with no routes (``one``) every job is
written in the scratch database; with ``LEASEJOBS_QUEUE_DATABASES = {"reports": "shard"}``
(``two``) the ``reports`` half is written in the ``shard`` alias's database (the scratch
database's name with ``_shard``: testproject's settings). The workers get the same routes
through ``BENCHMARK_QUEUE_DATABASES`` (benchmarks.settings); in ``two`` one serves the home
database and one runs with ``--database shard``. They start with the queues paused where the
jobs are and the pauses end once every worker is up, so neither start-up (nor one starting
later than the other) is in the figure; they are stopped once every job has finished. Every
drain is timed alike, from the first job's start to the last job's finish over both databases,
in database time (one server, one clock); each variant is drained twice (``ORDER``).
``two_vs_one`` is the ratio of their rates: with the databases on one server and two cores,
it is what serving two databases costs or saves, not the capacity a second server adds.
``two_start_gap_s`` and ``two_end_gap_s`` are how far apart the two databases' first starts
and last finishes were.

The checks are counts of what went wrong, each of which must be 0 (``report.medians`` keeps
their largest over runs): a job not run exactly once (every row succeeded at attempt 1: a claim
increments the attempt, so a second claim would show), a job in the other queue's database
(or, in ``one``, in the shard), and a job finished by a worker of the other database.

Beside it, ``enqueue()`` one at a time (autocommit, each its own transaction) to a routed queue
and to a home queue with the routes set, and to the home queue with no routes at all,
interleaved in blocks as the ``enqueue`` section's variants are: microseconds per call, ratios;
and the routing decision alone (``protocol.routes.routed`` for a routed queue, in a loop, no
database): ``routing_share`` is its part of a routed enqueue.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from django.test import override_settings
from psycopg import Connection
from testapp import jobs

from django_leasejobs.models.databases import using_database
from django_leasejobs.protocol import pause, resume
from django_leasejobs.protocol.routes import routed

from . import database
from .database import Target
from .processes import Group

ROUTED = "reports"
HOME = "default"
ROUTES = {ROUTED: database.SHARD_ALIAS}
BLOCK = 250
WORKER_FLAGS = ("--no-scheduler", "--heartbeat", "1", "--poll", "0.05")
"""Beside the defaults: a first heartbeat (the worker's row, which says it is up) after one
second rather than fifteen, and a look for due jobs every 50 ms while paused, so that both
databases' workers start within that of the pauses' end."""
READY = 0.5
"""Seconds the workers get after their rows appear before the pauses end."""
ORDER = ("one", "two", "two", "one")
"""Each variant drained twice, in mirrored order, so that a machine growing busier or quieter
during the run weighs on both alike; each figure is the mean of its two drains."""
"""Seconds the workers get after their rows appear before the pauses end."""


def _enqueue_costs(single_count: int) -> dict[str, float]:
    """Microseconds per ``enqueue()`` of each variant, interleaved in blocks of ``BLOCK``."""
    home, routed = jobs.noop.using(queue=HOME), jobs.noop.using(queue=ROUTED)

    def timed(routes: dict[str, str], call: Callable[[], Any], count: int) -> float:
        with override_settings(LEASEJOBS_QUEUE_DATABASES=routes):
            call()  # the settings are read again after a change: not in the timing
            start = time.perf_counter()
            for _ in range(count):
                call()
            return time.perf_counter() - start

    variants: dict[str, Callable[[int], float]] = {
        "home": lambda n: timed(ROUTES, home.enqueue, n),
        "routed": lambda n: timed(ROUTES, routed.enqueue, n),
        "no_routes": lambda n: timed({}, home.enqueue, n),
    }
    seconds = dict.fromkeys(variants, 0.0)
    names = list(variants)
    done = 0
    while done < single_count:
        block = min(BLOCK, single_count - done)
        turn = (done // BLOCK) % len(names)  # each round starts with the next variant
        for name in names[turn:] + names[:turn]:
            seconds[name] += variants[name](block)
        done += block
    return {name: value / single_count * 1e6 for name, value in seconds.items()}


def _routing_cost(count: int = 20_000) -> float:
    """Microseconds per routing decision of an enqueue to a routed queue (the setting read,
    the queue looked up, the database set for the block), with no database involved."""
    with override_settings(LEASEJOBS_QUEUE_DATABASES=ROUTES):
        with routed(database.NOOP, ROUTED):
            pass
        start = time.perf_counter()
        for _ in range(count):
            with routed(database.NOOP, ROUTED):
                pass
        return (time.perf_counter() - start) / count * 1e6


def _prepare(target: Target, shard: Target, jobs_count: int, routes: dict[str, str]) -> None:
    """Empty both databases, then enqueue half the jobs to each queue under ``routes``."""
    for each in (target, shard):
        with each.connect() as raw:
            database.reset(raw)
    half = jobs_count // 2
    with override_settings(LEASEJOBS_QUEUE_DATABASES=routes):
        for queue, count in ((HOME, jobs_count - half), (ROUTED, half)):
            for first in range(0, count, 1000):
                jobs.noop.using(queue=queue).enqueue_many([((), {})] * min(1000, count - first))
    for each in (target, shard):
        with each.connect() as raw:
            database.vacuum_analyze(raw)


def _census(db: Target, queues: list[str], worker_ids: list[str]) -> dict[str, Any]:
    """One database's rows after a drain: how many, how many not run exactly once, of a queue
    not in ``queues``, finished by a worker not in ``worker_ids``, and the first start and the
    last finish (epoch seconds)."""
    with db.connect() as raw:
        row = raw.execute(
            "SELECT count(*), "
            "count(*) FILTER (WHERE status <> 'succeeded' OR attempt <> 1), "
            "count(*) FILTER (WHERE NOT queue = ANY(%s::text[])), "
            "count(*) FILTER (WHERE NOT finished_by = ANY(%s::text[])), "
            "EXTRACT(EPOCH FROM min(started_at)), EXTRACT(EPOCH FROM max(finished_at)) "
            "FROM django_leasejobs_job",
            [queues, worker_ids],
        ).fetchone()
    assert row is not None
    rows, not_once, misplaced, crossed, first, last = row
    return {
        "rows": int(rows),
        "not_once": int(not_once),
        "misplaced": int(misplaced),
        "crossed": int(crossed),
        "first": None if first is None else float(first),
        "last": None if last is None else float(last),
    }


def _ready(conns: dict[str, Connection], ids: dict[str, list[str]]) -> bool:
    """Whether every worker has written its row (its first heartbeat) in its database."""
    for alias, worker_ids in ids.items():
        row = (
            conns[alias]
            .execute(
                "SELECT count(*) FROM django_leasejobs_worker WHERE worker_id = ANY(%s::text[])",
                [worker_ids],
            )
            .fetchone()
        )
        if row is None or row[0] < len(worker_ids):
            return False
    return True


def _finished(conns: dict[str, Connection]) -> int:
    query = "SELECT count(*) FROM django_leasejobs_job WHERE finished_at IS NOT NULL"
    return sum((conn.execute(query).fetchone() or (0,))[0] for conn in conns.values())


def _wait(group: Group, until: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.perf_counter() + timeout
    while not until():
        if any(p.poll() is not None for p in group.procs):
            group.check()
            raise RuntimeError(f"a worker exited before {what}")
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no {what} after {timeout:.0f} s")
        time.sleep(0.1)


def _drain(
    target: Target,
    shard: Target,
    *,
    jobs_count: int,
    workers: dict[str, list[str]],
    routes: dict[str, str],
    where: dict[str, tuple[list[str], list[str]]],
    timeout: float,
) -> dict[str, Any]:
    """Start ``workers`` (worker id -> argv) with every queue paused where its jobs are, lift
    the pauses once all of them are up, stop them once every job has finished, and read both
    databases: ``where`` gives, per alias, the queues its rows may have and the workers that
    may finish them.

    The pauses keep the workers' start-up out of the drain, as every drain here does, and
    also the difference between their start-ups: a worker ready half a second after the other
    would leave its database's jobs waiting that long, and two databases would look slower.
    """
    dbs = {"default": target, database.SHARD_ALIAS: shard}
    held = {alias: queues for alias, (queues, _) in where.items()}
    for alias, queues in held.items():
        with using_database(alias):
            for queue in queues:
                pause(queue=queue, by="benchmark")
    env = database.environment(target, BENCHMARK_QUEUE_DATABASES=json.dumps(routes))
    ids = {alias: ids for alias, (_, ids) in where.items() if ids}
    with target.connect() as home, shard.connect() as away:
        conns = {"default": home, database.SHARD_ALIAS: away}
        group = Group.start(list(workers.values()), env)
        try:
            _wait(group, lambda: _ready(conns, ids), timeout, "worker rows")
            time.sleep(READY)
            for alias, queues in held.items():
                with using_database(alias):
                    for queue in queues:
                        resume(queue=queue, by="benchmark")
            _wait(group, lambda: _finished(conns) >= jobs_count, timeout, "end of the drain")
        finally:
            group.stop()
    group.check()
    seen = {alias: _census(dbs[alias], *where[alias]) for alias in dbs}
    firsts = [s["first"] for s in seen.values() if s["first"] is not None]
    lasts = [s["last"] for s in seen.values() if s["last"] is not None]
    span = max(lasts) - min(firsts) if firsts and lasts else 0.0
    done = sum(s["rows"] for s in seen.values())
    if done != jobs_count:
        raise RuntimeError(f"{done} of {jobs_count} jobs found after the drain")
    gaps = {}
    if len(firsts) == len(lasts) == 2:
        gaps = {"start_gap_s": abs(firsts[0] - firsts[1]), "end_gap_s": abs(lasts[0] - lasts[1])}
    return {
        **gaps,
        "per_s": done / span if span else float("nan"),
        "home_jobs": seen["default"]["rows"],
        "shard_jobs": seen[database.SHARD_ALIAS]["rows"],
        "not_once_wrong": sum(s["not_once"] for s in seen.values()),
        "misplaced_wrong": sum(s["misplaced"] for s in seen.values()),
        "crossed_wrong": sum(s["crossed"] for s in seen.values()),
    }


def run(target: Target, *, jobs_count: int, single_count: int, timeout: float) -> dict[str, Any]:
    shard = database.shard(target)
    out: dict[str, Any] = {"shards_jobs": jobs_count}
    for each in (target, shard):
        with each.connect() as raw:
            database.reset(raw)
    costs = _enqueue_costs(single_count)
    routing = _routing_cost()
    out.update(
        {
            "shards_routing_us": routing,
            "shards_routing_share": routing / costs["routed"],
            "shards_enqueue_home_us": costs["home"],
            "shards_enqueue_routed_us": costs["routed"],
            "shards_enqueue_no_routes_us": costs["no_routes"],
            "shards_enqueue_routed_vs_home": costs["routed"] / costs["home"],
            "shards_enqueue_home_vs_no_routes": costs["home"] / costs["no_routes"],
        }
    )

    def worker(worker_id: str, *extra: str) -> list[str]:
        return database.manage("runjobworker", *WORKER_FLAGS, "--worker-id", worker_id, *extra)

    one = ["shards-one-1", "shards-one-2"]
    variants: dict[str, dict[str, Any]] = {
        "one": {
            "workers": {worker_id: worker(worker_id) for worker_id in one},
            "routes": {},
            # Every job at home, whichever its queue; none in the shard.
            "where": {"default": ([HOME, ROUTED], one), database.SHARD_ALIAS: ([], [])},
        },
        "two": {
            "workers": {
                "shards-home": worker("shards-home"),
                "shards-shard": worker("shards-shard", "--database", database.SHARD_ALIAS),
            },
            "routes": ROUTES,
            "where": {
                "default": ([HOME], ["shards-home"]),
                database.SHARD_ALIAS: ([ROUTED], ["shards-shard"]),
            },
        },
    }
    drained: dict[str, list[dict[str, Any]]] = {"one": [], "two": []}
    for name in ORDER:
        variant = variants[name]
        _prepare(target, shard, jobs_count, variant["routes"])
        drained[name].append(
            _drain(target, shard, jobs_count=jobs_count, timeout=timeout, **variant)
        )
    for name, figures in drained.items():
        for key in figures[0]:
            values = [f[key] for f in figures]
            # A check adds up what went wrong in either drain; a figure is their mean.
            if key.endswith("_wrong"):
                out[f"shards_{name}_{key}"] = sum(values)
            elif all(value == values[0] for value in values):
                out[f"shards_{name}_{key}"] = values[0]
            else:
                out[f"shards_{name}_{key}"] = sum(values) / len(values)
    out["shards_two_vs_one"] = out["shards_two_per_s"] / out["shards_one_per_s"]
    for each in (target, shard):
        with each.connect() as raw:
            database.reset(raw)
    return out
