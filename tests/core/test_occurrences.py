"""A schedule's occurrences and a tick's plan, as pure cron math: no database, a given now.

The rows are stand-ins with the fields the math reads; the scheduler's tests
(``tests/runtime/test_schedules.py``) run the same plans through real rows and ``tick()``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from django_leasejobs.core import occurrences
from django_leasejobs.core.cron import UTC, compile_cron
from django_leasejobs.errors import ScheduleError


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


CREATED = utc(2026, 1, 1)
NOW = utc(2026, 1, 1, 12, 5)


@dataclass
class Row:
    """The fields of a ``Schedule`` row that the plan reads."""

    cron: str = "*/10 * * * *"
    timezone: str = "UTC"
    name: str = "every-ten"
    misfire: str = occurrences.ALL
    catchup_window: int = 3600
    last_occurrence_at: dt.datetime | None = None
    created_at: dt.datetime = CREATED


def plan(row: Row, now: dt.datetime = NOW, budget: int = 1000) -> occurrences.Plan | None:
    return occurrences.plan(row, occurrences.cron_of(row), now, budget)


def test_the_misfire_values_are_the_models() -> None:
    from django_leasejobs.models import Misfire

    assert sorted(Misfire.values) == sorted([occurrences.ALL, occurrences.LATEST, occurrences.SKIP])


def test_a_bad_expression_names_its_schedule() -> None:
    with pytest.raises(ScheduleError, match="Schedule 'broken': "):
        occurrences.cron_of(Row(cron="61 * * * *", name="broken"))


def test_occurrences_between_want_aware_bounds() -> None:
    with pytest.raises(ValueError, match="start must be an aware datetime"):
        occurrences.occurrences_between(Row(), dt.datetime(2026, 1, 1), NOW)


def test_nothing_due_is_no_plan() -> None:
    assert plan(Row(last_occurrence_at=utc(2026, 1, 1, 12, 0))) is None


def test_all_emits_what_the_window_holds_and_skips_the_rest() -> None:
    result = plan(Row(last_occurrence_at=utc(2026, 1, 1, 10, 0)))
    assert result is not None
    # The window is the hour before now: 11:05 < t <= 12:05.
    assert result.emit == [utc(2026, 1, 1, 11, m) for m in (10, 20, 30, 40, 50)] + [
        utc(2026, 1, 1, 12, 0)
    ]
    assert (result.skip_through, result.skip_count) == (utc(2026, 1, 1, 11, 0), 6)
    assert result.skip_reason == "misfire=all: older than the catch-up window (3600s)"


def test_the_budget_bounds_what_one_plan_emits() -> None:
    result = plan(Row(last_occurrence_at=utc(2026, 1, 1, 11, 30)), budget=2)
    assert result is not None
    assert result.emit == [utc(2026, 1, 1, 11, 40), utc(2026, 1, 1, 11, 50)]
    assert result.skip_through is None


@pytest.mark.parametrize(
    ("misfire", "reason"),
    [
        (occurrences.LATEST, "misfire=latest: only the newest due occurrence runs"),
        (occurrences.SKIP, "misfire=skip: missed by more than 600s"),
    ],
)
def test_latest_and_skip_emit_the_newest_and_skip_the_ones_before(
    settings, misfire: str, reason: str
) -> None:
    """Latest: only the newest runs; skip: only what is late by less than the grace."""
    settings.LEASEJOBS_MISFIRE_GRACE_SECONDS = 600
    result = plan(Row(misfire=misfire, last_occurrence_at=utc(2026, 1, 1, 11, 30)))
    assert result is not None
    assert result.emit == [utc(2026, 1, 1, 12, 0)]
    assert (result.skip_through, result.skip_count) == (utc(2026, 1, 1, 11, 50), 2)
    assert result.skip_reason == reason


def test_latest_skips_everything_when_the_newest_is_too_old() -> None:
    row = Row(
        misfire=occurrences.LATEST, catchup_window=60, last_occurrence_at=utc(2026, 1, 1, 11, 30)
    )
    result = plan(row)
    assert result is not None
    assert result.emit == []
    assert (result.skip_through, result.skip_count) == (utc(2026, 1, 1, 12, 0), 3)


def test_a_count_past_the_cap_is_left_empty() -> None:
    every_minute = compile_cron("* * * * *", "UTC")
    start = utc(2026, 1, 1)
    assert occurrences.count(every_minute, start, start + dt.timedelta(minutes=10)) == 10
    cap = occurrences.COUNT_CAP
    assert occurrences.count(every_minute, start, start + dt.timedelta(minutes=cap)) == cap
    assert occurrences.count(every_minute, start, start + dt.timedelta(minutes=cap + 1)) is None


def test_newest_looks_back_past_a_year() -> None:
    leap_day = compile_cron("0 0 29 2 *", "UTC")
    assert occurrences.newest(leap_day, utc(2020, 1, 1), utc(2026, 1, 1)) == utc(2024, 2, 29)
    assert occurrences.newest(leap_day, utc(2024, 3, 1), utc(2026, 1, 1)) is None
