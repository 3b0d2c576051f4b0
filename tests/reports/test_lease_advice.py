"""The lease advisor's rule and its one-sentence reasons, on worked cases."""

from __future__ import annotations

import pytest

from django_leasejobs.reports.lease_advice import heartbeat_keeps, seconds_text, suggest


def test_a_job_of_41_seconds_gets_a_minute_renewed_every_15_seconds() -> None:
    advice = suggest(41.0, 50.0, runs=1000, stale=0)
    assert advice is not None
    assert (advice.lease, advice.heartbeat) == (60.0, 15.0)
    assert advice.reason == (
        "p99 41 s; lease 60 s renewed every 15 s keeps a healthy run's claim with 3 missed "
        "beats of slack; a crash is retried after 60 s"
    )


def test_short_jobs_get_the_shortest_lease() -> None:
    advice = suggest(0.25, 0.9, runs=50, stale=0)
    assert advice is not None
    assert (advice.lease, advice.heartbeat) == (20.0, 5.0)
    assert advice.reason.startswith("p99 0.25 s; lease 20 s renewed every 5 s")


def test_long_jobs_are_kept_by_the_heartbeat_and_a_crash_is_still_retried_soon() -> None:
    advice = suggest(2400.0, 3100.0, runs=20, stale=0)
    assert advice is not None
    assert (advice.lease, advice.heartbeat) == (300.0, 75.0)
    assert advice.reason == (
        "p99 40 min; lease 5 min renewed every 75 s keeps a healthy run's claim with 3 missed "
        "beats of slack; a crash is retried after 5 min, not after a whole run (up to 51.7 min)"
    )


def test_stale_reports_over_one_percent_halve_the_heartbeat() -> None:
    advice = suggest(41.0, 50.0, runs=200, stale=3)
    assert advice is not None
    assert (advice.lease, advice.heartbeat) == (60.0, 7.5)
    assert advice.reason == (
        "3 stale reports in 200 runs say beats are missed; p99 41 s; lease 60 s renewed every "
        "7.5 s keeps a healthy run's claim with 7 missed beats of slack; a crash is retried "
        "after 60 s"
    )
    at_the_limit = suggest(41.0, 50.0, runs=200, stale=2)  # 1 %: not over it
    assert at_the_limit is not None
    assert at_the_limit.heartbeat == 15.0


def test_no_runs_no_suggestion() -> None:
    assert suggest(None, 0.0, runs=0, stale=0) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0123, "0.012 s"),
        (2.5, "2.5 s"),
        (41.4, "41 s"),
        (90, "90 s"),
        (300, "5 min"),
        (5400, "90 min"),
        (86400, "24 h"),
    ],
)
def test_seconds_text(seconds, text) -> None:
    assert seconds_text(seconds) == text


def test_a_heartbeat_keeps_a_lease_only_from_inside_it() -> None:
    assert heartbeat_keeps(60.0, 15.0)
    assert not heartbeat_keeps(5.0, 15.0)  # @job(lease=5) under a 15 s heartbeat
    assert not heartbeat_keeps(60.0, None)
