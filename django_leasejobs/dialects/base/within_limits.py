"""What a limited claim starts: the jobs it holds the keys of, within their limits, in claim order.

Database-neutral: every dialect reads its candidates, locks their keys and counts in its own
statements, then asks ``choose`` which candidates fit and ``fills`` what each rate bucket holds
after the claim. Rate windows are aligned to the epoch and read with the database's clock, so
every claimer agrees on them whatever its own clock says.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from ...models import Job

CANDIDATES_PER_SLOT = 2
"""Limited candidates read per job wanted: room for a few keys taken or locked elsewhere."""


class Candidate(NamedTuple):
    """A due job with limits, as the hint read saw it."""

    id: int
    priority: int
    run_at: dt.datetime
    queue: str
    concurrency_key: str | None
    concurrency_limit: int | None
    rate_key: str | None
    rate_limit: int | None
    rate_period: int | None


class Head(NamedTuple):
    """A due job without limits: only its place in the claim order matters."""

    id: int
    priority: int
    run_at: dt.datetime


class Held(NamedTuple):
    """What a claim holds before it counts: the candidates, the heads of the jobs without
    limits, and the limiter keys (``c:``/``r:``) it locked."""

    candidates: list[Candidate]
    heads: list[Head]
    locked: set[str]


class Bucket(NamedTuple):
    """A rate key's window as its locked limiter row says, and the database's now."""

    window_start: dt.datetime | None
    started: int
    now: dt.datetime


Fill = tuple[dt.datetime, int, int, int]
"""A rate key's window after a claim: start, starts so far, limit, period (seconds)."""


def concurrency_lock(key: str) -> str:
    """The limiter key a claim locks for a concurrency key."""
    return "c:" + key


def rate_lock(key: str) -> str:
    """The limiter key a claim locks for a rate key."""
    return "r:" + key


def limiter_keys(candidates: Iterable[Candidate]) -> list[str]:
    """The limiter keys of ``candidates``, in the order claimers lock them."""
    keys = {concurrency_lock(c.concurrency_key) for c in candidates if c.concurrency_key}
    keys |= {rate_lock(c.rate_key) for c in candidates if c.rate_key}
    return sorted(keys)


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


def _order(item: Candidate | Head) -> tuple[int, dt.datetime, int]:
    return (-item.priority, item.run_at, item.id)


def choose(
    held: Held, batch: int, running: dict[str, int], buckets: dict[str, Bucket]
) -> list[Candidate]:
    """The limited candidates to start: in claim order among the jobs without limits, each
    within its key's free slots and its bucket's room (a key not locked has none)."""
    taken: list[Candidate] = []
    slots: Counter[str] = Counter()
    starts: Counter[str] = Counter()
    unlimited = 0
    merged: list[Candidate | Head] = [*held.candidates, *held.heads]
    for item in sorted(merged, key=_order):
        if len(taken) + unlimited >= batch:
            break
        if isinstance(item, Head):
            unlimited += 1
            continue
        if not _fits(item, held.locked, running, buckets, slots, starts):
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


def fills(jobs: list[Job], buckets: dict[str, Bucket]) -> dict[str, Fill]:
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
    result: dict[str, Any] = {}
    for key, counts in windows.items():
        start = max(counts)
        bucket = buckets[key]
        before = bucket.started if bucket.window_start == start else 0
        result[key] = (start, before + counts[start], *terms[key])
    return result
