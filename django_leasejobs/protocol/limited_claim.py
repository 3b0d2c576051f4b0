"""The claim of jobs with concurrency or rate limits, beside the claim of jobs without.

Why the limits hold with any number of claimers: a job with a limit starts only in a claim
that holds its key locked (``c:`` key, ``r:`` key; ``dialect.lock_limiters``) from before it
counts the key's running jobs and reads its rate bucket until it commits the jobs it started
and the bucket it filled. Two claimers never hold one key at once (a key held by another claimer is
skipped this round, not waited for), and each counts after the previous holder committed,
so neither can start jobs the other's count did not include. Counts only fall without the
lock (a job finishes, an expired lease is recovered), which can only leave a slot unused
until the next claim. SQLite has no row locks: there the claim takes the database's write
lock first, which serializes it with every other claimer.

Jobs over a limit are left as they are: pending, ``run_at`` and ``attempt`` unchanged, so a
limit costs no writes while it holds jobs back. The candidates are a hint read before the
counts, with full keys and spent buckets left out, so a key's backlog never hides other keys,
and the jobs without limits are claimed by today's statement (their own index), in one claim
order. Where a database reads them is its dialect's choice (``read_limited`` before the
transaction, ``hold_limited`` in it): the counts are always read after the locks.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from ..dialects import Dialect
from ..dialects.limited import Bucket, Candidate, Head, concurrency_lock, rate_lock
from ..models import Job

CANDIDATES_PER_SLOT = 2
"""Limited candidates read per job wanted: room for a few keys taken or locked elsewhere."""


def claim(
    dialect: Dialect,
    using: str,
    worker_id: str,
    queues: Sequence[str] | None,
    batch: int,
    lease_seconds: float,
) -> list[Job]:
    """Lease up to ``batch`` jobs, those with limits only within their limits."""
    # The usual claim when no job with limits is due (or, without an index of them, none is
    # among the first the usual claim would take).
    if not dialect.limited_due(using, queues, batch):
        return dialect.claim(using, worker_id, queues, batch, lease_seconds)
    count = batch * CANDIDATES_PER_SLOT
    first = dialect.read_limited(using, queues, count, batch)
    if first is not None and not first.candidates:  # all of them held back by their limits
        return dialect.claim(using, worker_id, queues, batch, lease_seconds)
    jobs: list[Job] = []
    with transaction.atomic(using=using):
        dialect.begin_limited(using)
        held = dialect.hold_limited(using, queues, count, batch, first)
        if held.candidates:
            ckeys = {c.concurrency_key for c in held.candidates if c.concurrency_key}
            rkeys = {c.rate_key for c in held.candidates if c.rate_key}
            running, buckets = dialect.limiter_state(using, ckeys, rkeys)
            chosen = choose(held.candidates, held.heads, batch, held.locked, running, buckets)
            jobs = dialect.take(using, worker_id, [c.id for c in chosen], lease_seconds)
            if rkeys:
                dialect.fill_buckets(using, _fills(jobs, buckets))
    rest = batch - len(jobs)
    if rest > 0 and held.heads:  # jobs without limits were due before this batch filled
        jobs += dialect.claim(using, worker_id, queues, rest, lease_seconds)
    return jobs


def _order(item: Candidate | Head) -> tuple[int, dt.datetime, int]:
    return (-item.priority, item.run_at, item.id)


def window_start(now: dt.datetime, period: int) -> dt.datetime:
    """The start of the rate window ``now`` falls in: windows are aligned to the epoch, so
    every claimer agrees on them whatever its own clock says (``now`` is the database's)."""
    epoch = now.timestamp()
    return dt.datetime.fromtimestamp(math.floor(epoch / period) * period, tz=dt.timezone.utc)


def room(bucket: Bucket, limit: int, period: int) -> int:
    """Starts the rate key may still make in the current window."""
    if bucket.window_start is None or bucket.window_start != window_start(bucket.now, period):
        return limit
    return max(0, limit - bucket.started)


def choose(
    candidates: list[Candidate],
    heads: list[Head],
    batch: int,
    locked: set[str],
    running: dict[str, int],
    buckets: dict[str, Bucket],
) -> list[Candidate]:
    """The limited candidates to start: in claim order among the jobs without limits, each
    within its key's free slots and its bucket's room (a key not locked has none)."""
    taken: list[Candidate] = []
    slots: Counter[str] = Counter()
    starts: Counter[str] = Counter()
    unlimited = 0
    merged: list[Candidate | Head] = [*candidates, *heads]
    for item in sorted(merged, key=_order):
        if len(taken) + unlimited >= batch:
            break
        if isinstance(item, Head):
            unlimited += 1
            continue
        if not _fits(item, locked, running, buckets, slots, starts):
            continue
        taken.append(item)
        if item.concurrency_key:
            slots[item.concurrency_key] += 1
        if item.rate_key:
            starts[item.rate_key] += 1
    return taken


def _fits(
    c: Candidate,
    locked: set[str],
    running: dict[str, int],
    buckets: dict[str, Bucket],
    slots: Counter[str],
    starts: Counter[str],
) -> bool:
    if c.concurrency_key:
        if concurrency_lock(c.concurrency_key) not in locked or c.concurrency_limit is None:
            return False
        if running.get(c.concurrency_key, 0) + slots[c.concurrency_key] >= c.concurrency_limit:
            return False
    if c.rate_key:
        bucket = buckets.get(c.rate_key)
        if rate_lock(c.rate_key) not in locked or bucket is None:
            return False
        if c.rate_limit is None or c.rate_period is None:
            return False
        if starts[c.rate_key] >= room(bucket, c.rate_limit, c.rate_period):
            return False
    return True


def _fills(jobs: list[Job], buckets: dict[str, Bucket]) -> dict[str, Any]:
    """Each rate key's window after this claim: the window its jobs' ``started_at`` fall in,
    with the jobs started in it counted in.

    The window is the jobs' own, not the clock the bucket was read with: the database's clock
    is read per statement (PostgreSQL's ``STATEMENT_TIMESTAMP()``, MariaDB's and SQLite's
    now), so a claim that read its bucket just before a window ended may start its jobs just
    after. Those starts count in the window they happened in; counting them in the old one let
    the next claims start a full window more in the same minute.
    """
    terms: dict[str, tuple[int, int]] = {}
    windows: dict[str, Counter[dt.datetime]] = {}
    for job in jobs:
        key, limit, period = job.rate_key, job.rate_limit, job.rate_period
        if not key or limit is None or period is None:
            continue
        terms[key] = (limit, period)
        at = job.started_at or buckets[key].now
        windows.setdefault(key, Counter())[window_start(at, period)] += 1
    fills: dict[str, Any] = {}
    for key, counts in windows.items():
        start = max(counts)
        bucket = buckets[key]
        before = bucket.started if bucket.window_start == start else 0
        fills[key] = (start, before + counts[start], *terms[key])
    return fills
