"""Durations typed by operators: units required unless the option says seconds."""

from __future__ import annotations

import datetime as dt

import pytest

from django_leasejobs.core.durations import format_age, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("7d", 7 * 86400),
        ("12h", 12 * 3600),
        ("30m", 1800),
        ("90s", 90),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("2w", 14 * 86400),
        (" 3D ", 3 * 86400),
        ("0s", 0),
    ],
)
def test_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


def test_bare_numbers_are_seconds_only_where_allowed() -> None:
    assert parse_duration("60", bare_seconds=True) == dt.timedelta(seconds=60)
    assert parse_duration(2.5, bare_seconds=True) == dt.timedelta(seconds=2.5)
    with pytest.raises(ValueError, match="'60' has no unit"):
        parse_duration("60")
    with pytest.raises(ValueError, match="60 has no unit"):
        parse_duration(60)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "An empty duration"),
        ("-1d", "zero or more"),
        ("7x", "'7x' is not a duration"),
        ("d", "'d' is not a duration"),
        ("1h 30m", "is not a duration"),
        ("nan", "is not a duration"),
        ("99999999999999d", "too long"),
        (None, "None is not a duration"),
        (True, "True is not a duration"),
        (float("inf"), "zero or more"),
    ],
)
def test_bad_durations_say_what_to_write(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_duration(value, bare_seconds=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (59.9, "59s"),
        (125, "2m05s"),
        (3 * 3600 + 600, "3h10m"),
        (2 * 86400 + 4 * 3600, "2d04h"),
    ],
)
def test_format_age(seconds: float, text: str) -> None:
    assert format_age(seconds) == text
