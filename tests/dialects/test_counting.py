"""counting.count(): exact up to the cap, then the planner's estimate (PostgreSQL) or a bound."""

from __future__ import annotations

import pytest
from django.db import connection
from testapp import jobs

from django_leasejobs.dialects import counting
from django_leasejobs.dialects.counting import Count, Kind
from django_leasejobs.models import Job

pytestmark = pytest.mark.django_db


def test_below_the_cap_the_count_is_exact() -> None:
    for _ in range(3):
        jobs.noop.enqueue()
    assert counting.count(Job.objects.all(), cap=3) == Count(3, Kind.EXACT)
    assert counting.count(Job.objects.filter(queue="nowhere"), cap=3) == Count(0)


def test_past_the_cap_an_estimate_on_postgresql_and_a_lower_bound_elsewhere() -> None:
    for _ in range(4):
        jobs.noop.enqueue()
    counted = counting.count(Job.objects.all(), cap=3)
    if connection.vendor == "postgresql":
        assert counted.kind is Kind.ESTIMATE
        assert counted.value > 3  # never below what was seen, whatever the statistics say
    else:
        assert counted == Count(3, Kind.AT_LEAST)
    assert not counted.exact


def test_the_default_cap_is_read_when_counting(monkeypatch) -> None:
    for _ in range(2):
        jobs.noop.enqueue()
    monkeypatch.setattr(counting, "CAP", 1)
    assert not counting.count(Job.objects.all()).exact


def test_estimate_is_the_planners_on_postgresql_only() -> None:
    jobs.noop.enqueue()
    guess = counting.estimate(Job.objects.filter(queue="default"))
    if connection.vendor == "postgresql":
        assert isinstance(guess, int)
        assert guess >= 0
    else:
        assert guess is None


def test_text_says_which_kind_of_number_it_is() -> None:
    assert Count(1234).text() == "1234"
    assert Count(12_345_678, Kind.ESTIMATE).text() == "~12,345,678"
    assert Count(10_000, Kind.AT_LEAST).text() == "10,000+"
    assert Count(5).why() == ""
    assert "estimate" in Count(20_000, Kind.ESTIMATE).why()
    assert "stopped" in Count(10_000, Kind.AT_LEAST).why()
