"""Four worker processes hold a rate of 120 a minute exactly, window after window.

A rate limit counts starts per window aligned to the database's clock; the limiter is accurate
when each window of a key with enough backlog gets exactly its limit: no start more (the limit)
and none fewer (no slot left unused while jobs wait). Waiting a real minute per window would
make the test slow, so the test ends each window itself, the way time would: once the bucket
row is full it moves the row's window into the past (database time), and the workers' next
claims open a new window. A window is checked from the jobs' own ``started_at``, not from the
bucket row's count.

The real clock still turns minutes during the run. A claim that starts after a minute's end
opens a new window on its own, so starts are grouped by (window the test opened, minute of
``started_at``): every group holds at most the limit, and the group the full bucket belongs to
holds exactly the limit. The test moves a window only if the row still holds the one it saw
full, so a minute that turned by itself is not ended twice.
"""

from __future__ import annotations

import datetime as dt
import signal
from collections import Counter

import pytest
from testapp import jobs

from django_leasejobs.db.dbtime import DbNow
from django_leasejobs.dialects.base.within_limits import window_start
from django_leasejobs.models import Job, Limiter, Status

from ..conftest import shifted
from ..invariants import check_invariants, wait_for
from .conftest import FAST, wait_started

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

LIMIT, PERIOD = 120, 60  # jobs.rate_120
WINDOWS = 4
KEY = "r:" + jobs.rate_120.name


def full_window() -> dt.datetime | None:
    """The start of the bucket's window once its starts reached the limit, while it lasts."""
    row = Limiter.objects.filter(key=KEY, started__gte=LIMIT, blocked_until__gt=DbNow()).first()
    return row.window_start if row else None


def started(ids: list[int]) -> dict[int, dt.datetime]:
    return dict(Job.objects.filter(pk__in=ids, attempt__gt=0).values_list("pk", "started_at"))


def settled(ids: list[int]) -> tuple[dt.datetime, dict[int, dt.datetime]] | None:
    """The full window and the starts so far, read while the bucket stayed the same (a claim
    commits its starts and its bucket together, so none of the next window is among them)."""
    full = full_window()
    if full is None:
        return None
    starts = started(ids)
    return (full, starts) if full_window() == full else None


def test_four_workers_start_exactly_the_rate_in_each_window(spawn) -> None:
    ids = [j.pk for j in jobs.rate_120.enqueue_many([((n,), {}) for n in range(LIMIT * 5)])]
    workers = [spawn("--concurrency", "4", *FAST, name=f"a{n}") for n in range(4)]
    groups: Counter[tuple[int, dt.datetime]] = Counter()
    full_groups: list[tuple[int, dt.datetime]] = []
    seen: set[int] = set()
    full = None
    for index in range(WINDOWS):
        if index:  # the window the test saw full ends: database time moves on
            Limiter.objects.filter(key=KEY, started__gte=LIMIT, window_start=full).update(
                window_start=shifted(-2 * PERIOD), blocked_until=shifted(-1)
            )
        full, starts = wait_for(lambda: settled(ids), timeout=120, what=f"window {index} full")
        new = {pk: at for pk, at in starts.items() if pk not in seen}
        seen |= set(new)
        groups.update((index, window_start(at, PERIOD)) for at in new.values())
        full_groups.append((index, full))
    for worker in workers:  # one the others left no work to may still be starting
        wait_started(worker)
    for worker in workers:
        worker.send(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0
    late = {pk: at for pk, at in started(ids).items() if pk not in seen}
    groups.update((WINDOWS, window_start(at, PERIOD)) for at in late.values())

    assert all(n <= LIMIT for n in groups.values()), groups  # never over the rate
    assert [groups[g] for g in full_groups] == [LIMIT] * WINDOWS, (groups, full_groups)
    # Starts outside the full windows come only from a minute the real clock turned: an
    # earlier minute cut short before its index's full window, or one after the last.
    full_of = dict(full_groups)
    for index, minute in groups:
        if (index, minute) not in full_groups:
            late_minute = minute > full_of[WINDOWS - 1]
            assert late_minute if index == WINDOWS else minute < full_of[index], groups
    rows = check_invariants(ids, final=False, expected_count=len(ids))
    # Each claimed job ran once, or was claimed ahead and released by its worker's shutdown.
    charged = {(r.status, r.attempt - r.released) for r in rows if r.attempt}
    assert charged <= {(Status.SUCCEEDED, 1), (Status.PENDING, 0)}, charged
    assert (Status.SUCCEEDED, 1) in charged
    assert {(r.status, r.last_error) for r in rows if not r.attempt} == {(Status.PENDING, "")}
