"""The worker's in-memory runtime counts: what counts as a run, and counts put back."""

from __future__ import annotations

from django_leasejobs.core import histogram
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime.runtime_tally import Tally


def test_runs_stale_reports_and_recoveries_are_counted_per_name() -> None:
    tally = Tally()
    tally.outcome("a", 2.0, Outcome.SUCCEEDED, ran=True, lease=60.0)
    tally.outcome("a", 9.0, Outcome.RETRIED, ran=True, lease=60.0)
    tally.outcome("a", 30.0, Outcome.STALE, ran=True, lease=60.0)  # ran, then refused
    tally.outcome("a", 0.0, Outcome.RELEASED, ran=True, lease=60.0)  # handed back: no run
    tally.outcome("a", 1.0, Outcome.CANCELLED, ran=True, lease=60.0)  # cut short: no run
    tally.outcome("a", 0.0, Outcome.STALE, ran=False, lease=60.0)  # released, token spent
    tally.recovered(["a", "b"])
    counts = tally.take()
    a = counts["a"]
    assert (a.runs, a.seconds, a.max_seconds, a.stale, a.recovered) == (3, 41.0, 30.0, 2, 1)
    assert a.buckets == histogram.counts([2.0, 9.0, 30.0])
    assert (counts["b"].runs, counts["b"].recovered) == (0, 1)
    assert tally.take() == {}


def test_counts_put_back_after_a_failed_flush_add_to_the_newer_ones() -> None:
    tally = Tally()
    tally.outcome("a", 2.0, Outcome.SUCCEEDED, ran=True, lease=60.0)
    failed = tally.take()
    tally.outcome("a", 4.0, Outcome.SUCCEEDED, ran=True, lease=90.0)
    tally.put_back(failed)
    (a,) = tally.take().values()
    assert (a.runs, a.seconds, a.lease_seconds) == (2, 6.0, 90.0)
    assert a.buckets == histogram.counts([2.0, 4.0])
