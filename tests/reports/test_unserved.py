"""Queues holding due jobs that a worker does not serve: what ``--burst`` names, and how a
worker's row says what it serves."""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs.dialects.counting import Count
from django_leasejobs.reports import unserved

pytestmark = pytest.mark.django_db


def test_left_behind_counts_the_first_queues_not_served_and_says_how_many_more(make_due) -> None:
    names = [f"q{n:02}" for n in range(unserved.LISTED + 2)]
    for name in names:
        make_due(*jobs.noop.enqueue_many([{"queue": name}] * 2))
    jobs.noop.enqueue(queue="later", delay=3600)  # waiting, not due: not left behind
    make_due(jobs.noop.enqueue())  # served
    left, more = unserved.left_behind(["default"])
    assert left == [(name, Count(2)) for name in names[: unserved.LISTED]]
    assert more == 2
    assert unserved.left_behind(None) == ([], 0)


def test_serves_reads_a_worker_row() -> None:
    assert unserved.serves("*", "emails")
    assert unserved.serves("default,emails", "emails")
    assert not unserved.serves("default,emails", "email")
    assert unserved.serves("default,em\u2026", "reports")  # a cut list may serve anything
