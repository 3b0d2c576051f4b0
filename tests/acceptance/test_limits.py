"""Four worker processes and flow limits: the history shows no key ever ran over its limit.

The check uses only the rows: each job ran once (attempt 1), so ``[started_at, finished_at]``
is exactly when it held a slot, both in database time. Every start and every finish is an
event; walking them in time order (a finish before a start at the same instant: the slot was
freed by a commit the claim then saw) gives the running count of each key at every change.
"""

from __future__ import annotations

import datetime as dt
import signal
from collections import Counter, defaultdict

import pytest
from testapp import jobs

from django_leasejobs.models import Job, Status

from ..invariants import wait_for
from .conftest import FAST, wait_started

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

CUSTOMERS = 5
PER_CUSTOMER = 12
LIMIT = 2  # jobs.per_customer


def most_at_once(rows: list[tuple[str, dt.datetime, dt.datetime]]) -> dict[str, int]:
    """The most jobs of each key running at the same instant, over every row change."""
    events: dict[str, list[tuple[dt.datetime, int]]] = defaultdict(list)
    for key, started, finished in rows:
        events[key] += [(started, 1), (finished, -1)]
    peaks = {}
    for key, changes in events.items():
        running = peak = 0
        for _, change in sorted(changes):  # -1 sorts before +1 at the same instant
            running += change
            peak = max(peak, running)
        peaks[key] = peak
    return peaks


def test_most_at_once_counts_overlaps() -> None:
    t = [
        dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=s) for s in range(6)
    ]
    rows = [("a", t[0], t[2]), ("a", t[1], t[3]), ("a", t[3], t[4]), ("b", t[0], t[5])]
    assert most_at_once(rows) == {"a": 2, "b": 1}


@pytest.mark.slow  # .ci/run: each database's pass, not the Django-version or binding passes
def test_four_workers_never_run_more_than_the_limit_per_key(spawn) -> None:
    items = [((c, 0.05), {}) for _ in range(PER_CUSTOMER) for c in range(CUSTOMERS)]
    ids = [j.pk for j in jobs.per_customer.enqueue_many(items)]
    ids += [j.pk for j in jobs.noop.enqueue_many([((), {})] * 40)]
    workers = [spawn("--concurrency", "4", "--batch", "4", *FAST, name=f"l{n}") for n in range(4)]
    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED).count() == len(ids),
        timeout=180,
        what="every job succeeded",
    )
    for worker in workers:
        # A loaded machine may finish the jobs before a slow worker has started: a SIGTERM
        # during Django's setup ends the process before its graceful stop is in place.
        wait_started(worker)
        worker.send(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0
    rows = Job.objects.filter(pk__in=ids)
    assert {(r.status, r.attempt, len(r.errors)) for r in rows} == {(Status.SUCCEEDED, 1, 0)}
    limited = [(r.concurrency_key, r.started_at, r.finished_at) for r in rows if r.concurrency_key]
    peaks = most_at_once(limited)
    assert set(peaks) == {f"customer:{c}" for c in range(CUSTOMERS)}
    assert max(peaks.values()) <= LIMIT, peaks
    # Sixteen threads over five keys: the limit was reached, not only respected.
    assert max(peaks.values()) == LIMIT, peaks
    assert sum(w.log().count("job.running") for w in workers) == len(ids)


@pytest.mark.slow  # .ci/run: each database's pass, not the Django-version or binding passes
def test_four_workers_start_no_more_than_the_rate(spawn) -> None:
    ids = [j.pk for j in jobs.throttled.enqueue_many([((n,), {}) for n in range(12)])]  # 5/m
    workers = [spawn("--burst", "--concurrency", "2", *FAST, name=f"r{n}") for n in range(4)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    rows = list(Job.objects.filter(pk__in=ids))
    started = [r for r in rows if r.attempt]
    # Windows are aligned minutes: a run crossing a minute's end may start a second five.
    per_minute = Counter(r.started_at.replace(second=0, microsecond=0) for r in started)
    assert all(n <= 5 for n in per_minute.values()), per_minute
    assert len(started) == 5 * len(per_minute)
    held = [r for r in rows if not r.attempt]
    assert {(r.status, r.last_error, len(r.errors)) for r in held} == {(Status.PENDING, "", 0)}
    assert all(r.status == Status.SUCCEEDED for r in started)
