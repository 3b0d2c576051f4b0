"""Section ``fairness``: the order fair keys give, and what they cost (docs/fairness.md).

Order, read from the claims of one thread (``protocol.claim`` of one job at a time, in the
order a worker with one thread would run them):

- ``fair_newcomers_last_run``: a backlog of N jobs of one key enqueued first (one
  ``enqueue_many``), then one job of each of 100 other keys (``enqueue()`` each): the run at
  which the last of the 100 started (1-based; the target is 110 at most);
- ``fair_heavy_share``: two keys of weight 2 and 1 with 1,000 jobs each (the heavier first):
  the heavier key's share of the first 300 runs (the target: 0.6 to 0.73).

Cost, each against the same job without a fair key (``testapp.jobs.account_work``), the
variants alternated round by round from an empty table, medians of the rounds:

- ``fair_single_vs_plain``: ``enqueue()`` of jobs over 1,000 keys, one at a time;
- ``fair_bulk_vs_plain``: ``enqueue_many`` in lists of 1,000 over 1,000 keys, every job of a
  list a key of its own (the worst case: a read per key); ``fair_bulk_10_vs_plain``: the same
  with 10 keys per list (one customer's import is one key); ``fair_bulk_read_ms``: the read of
  a list's 1,000 keys alone (the dialect's ``_fair_lines``, on the table the last list left);
- ``fair_statement_*_vs_plain`` and ``fair_given_*_vs_plain``: the ceilings, the enqueues'
  own statements replayed with nothing around them (benchmarks/fairness_ceiling.py);
- ``fair_drain_vs_plain``: ``runjobworker --burst`` processes draining N no-op jobs that
  ``enqueue_many`` spread over 1,000 keys (timed as every drain is: first start to last
  finish, database time).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from testapp import jobs

from django_leasejobs import dialects, protocol
from django_leasejobs.dialects.fair_lines import Group as FairGroup

from . import database, drain, fairness_ceiling
from .database import Target

NEWCOMERS = 100
KEYS = 1000
LIST = 1000


def _reset(target: Target) -> None:
    with target.connect() as raw:
        database.reset(raw)


def _claimed_keys(count: int) -> list[str | None]:
    """The fair keys of the next ``count`` jobs one thread would run, in order."""
    keys: list[str | None] = []
    for _ in range(count):
        claimed = protocol.claim("fairness-bench", batch=1)
        if not claimed:
            break
        keys.append(claimed[0].fair_key)
    return keys


def newcomers(target: Target, backlog: int) -> int:
    _reset(target)
    jobs.per_account.enqueue_many([(("big",), {"n": n}) for n in range(backlog)])
    for index in range(NEWCOMERS):
        jobs.per_account.enqueue(f"new-{index}")
    keys = _claimed_keys(backlog + NEWCOMERS)
    return max(i for i, key in enumerate(keys, 1) if key != "account:big")


def heavy_share(target: Target) -> float:
    _reset(target)
    jobs.per_account.using(fair_key="heavy", fair_weight=2).enqueue_many(
        [(("heavy",), {"n": n}) for n in range(1000)]
    )
    jobs.per_account.using(fair_key="light").enqueue_many(
        [(("light",), {"n": n}) for n in range(1000)]
    )
    keys = _claimed_keys(300)
    return keys.count("heavy") / len(keys)


def _items(count: int, keys: int = KEYS) -> list[tuple[tuple[str], dict[str, int]]]:
    """Jobs dealt over ``keys`` keys: each list of 1,000 holds every key (at most 1,000)."""
    return [((f"a{n % keys}",), {"n": n}) for n in range(count)]


def _timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _single(job: Any, count: int) -> Callable[[], Any]:
    def run() -> None:
        for n in range(count):
            job.enqueue(f"a{n % KEYS}", n)

    return run


def _bulk(job: Any, count: int, keys: int = KEYS) -> Callable[[], Any]:
    items = _items(count, keys)

    def run() -> None:
        for start in range(0, count, LIST):
            job.enqueue_many(items[start : start + LIST])

    return run


def _read_ms(target: Target, count: int) -> float:
    """Milliseconds of one read of 1,000 keys' lines, on a table of ``count`` fair jobs."""
    _reset(target)
    _bulk(jobs.per_account, count)()
    groups = [FairGroup("default", 0, f"account:a{n}") for n in range(KEYS)]
    read = dialects.for_alias(DEFAULT_DB_ALIAS)._fair_lines
    read(DEFAULT_DB_ALIAS, groups)
    return 1000 * statistics.median(
        _timed(lambda: read(DEFAULT_DB_ALIAS, groups)) for _ in range(5)
    )


def _alternated(
    target: Target, rounds: int, variants: dict[str, Callable[[], float]]
) -> dict[str, float]:
    """Each variant's median over ``rounds``, each round starting with the next variant."""
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for turn in range(rounds):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            _reset(target)
            seconds[name].append(variants[name]())
    return {name: statistics.median(values) for name, values in seconds.items()}


def run(
    target: Target,
    *,
    jobs_count: int,
    single_count: int,
    procs: Sequence[int],
    batch: int,
    threads: int,
    rounds: int,
    timeout: float,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "fair_jobs": jobs_count,
        "fair_single_jobs": single_count,
        "fair_newcomers_last_run": newcomers(target, jobs_count // 2),
        "fair_newcomers_backlog": jobs_count // 2,
        "fair_heavy_share": heavy_share(target),
    }
    enqueues = _alternated(
        target,
        rounds,
        {
            "single_fair": lambda: _timed(_single(jobs.per_account, single_count)),
            "single_plain": lambda: _timed(_single(jobs.account_work, single_count)),
            "bulk_fair": lambda: _timed(_bulk(jobs.per_account, jobs_count)),
            "bulk_10_fair": lambda: _timed(_bulk(jobs.per_account, jobs_count, keys=10)),
            "bulk_plain": lambda: _timed(_bulk(jobs.account_work, jobs_count)),
        },
    )
    out["fair_bulk_10_fair_per_s"] = jobs_count / enqueues["bulk_10_fair"]
    out["fair_bulk_read_ms"] = _read_ms(target, jobs_count)
    for kind, count in (("single", single_count), ("bulk", jobs_count)):
        for variant in ("fair", "plain"):
            out[f"fair_{kind}_{variant}_per_s"] = count / enqueues[f"{kind}_{variant}"]
        out[f"fair_{kind}_vs_plain"] = (
            out[f"fair_{kind}_fair_per_s"] / out[f"fair_{kind}_plain_per_s"]
        )
    out["fair_bulk_10_vs_plain"] = out["fair_bulk_10_fair_per_s"] / out["fair_bulk_plain_per_s"]
    lists = max(1, jobs_count // LIST)
    statements = fairness_ceiling.variants(single_count, lists, keys=10)
    out.update(fairness_ceiling.ratios(_alternated(target, rounds, statements)))
    argv = drain.worker_argv("--burst", batch=batch, threads=threads)
    for p in procs:
        rates: dict[str, list[float]] = {"fair": [], "plain": []}
        for turn in range(rounds):
            order = ("fair", "plain") if turn % 2 == 0 else ("plain", "fair")
            for variant in order:
                _reset(target)
                job = jobs.per_account if variant == "fair" else jobs.account_work
                _bulk(job, jobs_count)()
                with target.connect() as raw:
                    database.vacuum_analyze(raw)
                figures = drain.drain_jobs(target, [argv] * p, expected=jobs_count, timeout=timeout)
                rates[variant].append(figures["per_s"])
        for variant, values in rates.items():
            out[f"fair_p{p}_{variant}_per_s"] = statistics.median(values)
        out[f"fair_p{p}_drain_vs_plain"] = (
            out[f"fair_p{p}_fair_per_s"] / out[f"fair_p{p}_plain_per_s"]
        )
    return out
