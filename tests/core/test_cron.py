"""Occurrences of cron expressions in a timezone: DST, validation, and properties over many inputs.

These are pure functions (no database): the instants every scheduler and the admin agree on.
"""

from __future__ import annotations

import datetime as dt
import itertools
import zoneinfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_leasejobs.core.cron import (
    UTC,
    Cron,
    CronError,
    check_expression,
    check_timezone,
    representable,
)
from django_leasejobs.core.occurrences import occurrences_between
from django_leasejobs.errors import ScheduleError
from django_leasejobs.models import Schedule
from django_leasejobs.reports.occurrences import next_occurrences

from ..conftest import examples

BERLIN = "Europe/Berlin"


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def schedule(cron: str, timezone: str = "UTC") -> Schedule:
    return Schedule(name="s", cron=cron, timezone=timezone, job="testapp.jobs.noop")


def between(cron: str, timezone: str, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    return occurrences_between(schedule(cron, timezone), start, end)


class TestDaylightSaving:
    def test_a_skipped_wall_clock_time_fires_once_when_the_clock_jumps(self) -> None:
        # Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:30 never happens.
        fired = between("30 2 * * *", BERLIN, utc(2026, 3, 27, 12), utc(2026, 3, 30, 12))
        assert fired == [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)]
        assert fired[1].astimezone(zoneinfo.ZoneInfo(BERLIN)).strftime("%H:%M %Z") == "03:00 CEST"

    def test_a_repeated_wall_clock_time_fires_once_at_its_first_instance(self) -> None:
        # Berlin, 25 October 2026: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
        fired = between("30 2 * * *", BERLIN, utc(2026, 10, 23, 12), utc(2026, 10, 26, 12))
        assert fired == [
            utc(2026, 10, 24, 0, 30),
            utc(2026, 10, 25, 0, 30),
            utc(2026, 10, 26, 1, 30),
        ]
        assert fired[1].astimezone(zoneinfo.ZoneInfo(BERLIN)).strftime("%H:%M %Z") == "02:30 CEST"

    def test_fixed_hours_fire_each_wall_clock_time_once_in_the_repeated_hour(self) -> None:
        fired = between("*/15 2 * * *", BERLIN, utc(2026, 10, 24, 12), utc(2026, 10, 25, 12))
        assert fired == [utc(2026, 10, 25, 0, m) for m in (0, 15, 30, 45)]

    @pytest.mark.parametrize(
        ("start", "end"),
        [
            (utc(2026, 3, 28, 22), utc(2026, 3, 29, 4)),
            (utc(2026, 10, 24, 22), utc(2026, 10, 25, 4)),
        ],
        ids=["spring-forward", "fall-back"],
    )
    def test_every_hour_follows_elapsed_time_through_both_transitions(
        self, start: dt.datetime, end: dt.datetime
    ) -> None:
        fired = between("0 * * * *", BERLIN, start, end)
        assert fired == [start + dt.timedelta(hours=h) for h in range(1, 7)]

    def test_every_minute_keeps_firing_through_the_repeated_hour(self) -> None:
        start = utc(2026, 10, 24, 23, 30)
        fired = between("* * * * *", BERLIN, start, start + dt.timedelta(hours=3))
        assert fired == [start + dt.timedelta(minutes=m) for m in range(1, 181)]

    def test_every_minute_has_nothing_to_fire_in_the_skipped_hour(self) -> None:
        start = utc(2026, 3, 29, 0, 30)
        fired = between("* * * * *", BERLIN, start, start + dt.timedelta(hours=1))
        # Continuous in real time: 01:31 CET ... 01:59 CET, then 03:00 CEST ... 03:30 CEST.
        assert fired == [start + dt.timedelta(minutes=m) for m in range(1, 61)]

    def test_new_york(self) -> None:
        ny = "America/New_York"
        assert between("30 1 * * *", ny, utc(2026, 10, 31, 12), utc(2026, 11, 2, 12)) == [
            utc(2026, 11, 1, 5, 30),  # 01:30 EDT, the first of the two
            utc(2026, 11, 2, 6, 30),
        ]
        assert between("30 2 * * *", ny, utc(2026, 3, 7, 12), utc(2026, 3, 9, 12)) == [
            utc(2026, 3, 8, 7, 0),  # 03:00 EDT, when the clock jumps
            utc(2026, 3, 9, 6, 30),
        ]

    def test_half_hour_daylight_saving_on_lord_howe_island(self) -> None:
        lord_howe = "Australia/Lord_Howe"
        # 5 April 2026: 02:00 (+11) becomes 01:30 (+10:30); 01:45 happens twice.
        assert between("45 1 * * *", lord_howe, utc(2026, 4, 4, 0), utc(2026, 4, 6, 0)) == [
            utc(2026, 4, 4, 14, 45),
            utc(2026, 4, 5, 15, 15),
        ]
        # 4 October 2026: 02:00 (+10:30) becomes 02:30 (+11); 02:15 never happens.
        assert between("15 2 * * *", lord_howe, utc(2026, 10, 3, 0), utc(2026, 10, 5, 0)) == [
            utc(2026, 10, 3, 15, 30),
            utc(2026, 10, 4, 15, 15),
        ]

    def test_occurrences_are_utc_and_match_the_timezone_offset(self) -> None:
        fired = between("0 9 * * 1", "Asia/Kolkata", utc(2026, 1, 1), utc(2026, 1, 31))
        assert [t.tzinfo for t in fired] == [UTC] * 4
        assert fired[0] == utc(2026, 1, 5, 3, 30)


class TestRangeAndValidation:
    def test_start_is_exclusive_and_end_inclusive(self) -> None:
        fired = between("0 * * * *", "UTC", utc(2026, 1, 1, 1), utc(2026, 1, 1, 3))
        assert fired == [utc(2026, 1, 1, 2), utc(2026, 1, 1, 3)]

    def test_next_occurrences_after_an_instant(self) -> None:
        s = schedule("@daily", "Europe/Paris")
        assert next_occurrences(s, 2, after=utc(2026, 7, 1, 12)) == [
            utc(2026, 7, 1, 22),
            utc(2026, 7, 2, 22),
        ]
        assert next_occurrences(s, 0, after=utc(2026, 7, 1)) == []

    @pytest.mark.django_db
    def test_next_occurrences_default_to_after_the_database_now(self) -> None:
        from django_leasejobs.db.dbtime import db_now

        before = db_now()
        (first,) = next_occurrences(schedule("* * * * *"), 1)
        assert before < first <= before + dt.timedelta(seconds=61)

    @pytest.mark.parametrize(
        ("call", "message"),
        [
            (lambda: next_occurrences(schedule("@daily"), -1), "count must be"),
            (
                lambda: next_occurrences(schedule("@daily"), 1, dt.datetime(2026, 1, 1)),
                "aware",
            ),
            (
                lambda: between("@daily", "UTC", dt.datetime(2026, 1, 1), utc(2026, 1, 2)),
                "start must",
            ),
            (lambda: between("@daily", "UTC", utc(2026, 1, 1), "tomorrow"), "end must"),  # type: ignore[arg-type]
        ],
    )
    def test_bad_arguments_are_refused(self, call, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            call()

    def test_a_broken_schedule_names_itself_and_the_problem(self) -> None:
        with pytest.raises(ScheduleError, match=r"Schedule 's': .*out of range"):
            between("61 * * * *", "UTC", utc(2026, 1, 1), utc(2026, 1, 2))
        with pytest.raises(ScheduleError, match=r"Schedule 's': unknown timezone 'Mars/Olympus'"):
            between("@daily", "Mars/Olympus", utc(2026, 1, 1), utc(2026, 1, 2))

    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            ("", "empty"),
            ("* * * *", "4 fields; a cron expression has exactly five"),
            ("* * * * * *", "6 fields"),
            ("61 * * * *", "out of range"),
            ("*/0 * * * *", "step '0'"),
            ("0 0 30 2 *", "never matches a date"),
            ("@reboot", "unknown shorthand"),
            ("H * * * *", "Hashed"),
            ("R * * * *", "random"),
            ("bogus text here now x", "not acceptable|cannot parse"),
            (None, "is a string"),
        ],
    )
    def test_invalid_cron_expressions_say_why(self, expression: object, message: str) -> None:
        with pytest.raises(CronError, match=message):
            check_expression(expression)

    @pytest.mark.parametrize(
        ("expression", "field"),
        [
            ("R * * * *", "minute field 'R'"),
            ("r * * * *", "minute field 'r'"),
            ("0 R * * *", "hour field 'R'"),
            ("R(0-29) * * * *", "minute field 'R(0-29)'"),
            ("R/15 * * * *", "minute field 'R/15'"),
            ("0 0 R * *", "day-of-month field 'R'"),
            ("0 0 * R *", "month field 'R'"),
            ("0 0 * * r", "day-of-week field 'r'"),
            ("H * * * *", "minute field 'H'"),
            ("0 H(0-5) * * *", "hour field 'H(0-5)'"),
            ("H/15 * * * *", "minute field 'H/15'"),
            ("0 0 * * h", "day-of-week field 'h'"),
        ],
    )
    def test_random_and_hashed_fields_are_refused_naming_the_field(
        self, expression: str, field: str
    ) -> None:
        # croniter picks R afresh each time it reads the expression (and H from a seed that it
        # is not given): no two schedulers, nor two ticks, would agree on the occurrences.
        with pytest.raises(CronError) as caught:
            check_expression(expression)
        assert str(caught.value).startswith(f"the {field} is a ")
        assert "write the value you want" in str(caught.value)
        with pytest.raises(CronError):
            Cron(expression, "UTC")

    @pytest.mark.parametrize(
        "expression", ["0 3 * * thu", "0 3 * mar fri", "0 3 * MAR-APR THU#2", "0 0 ? * *"]
    )
    def test_names_with_h_or_r_in_them_are_still_accepted(self, expression: str) -> None:
        assert check_expression(expression) == expression

    @pytest.mark.parametrize("expression", ["@hourly", "@DAILY", " 0  3 * * 1-5 ", "0 0 L * *"])
    def test_valid_cron_expressions(self, expression: str) -> None:
        assert check_expression(expression) == " ".join(expression.split()).replace(
            "@DAILY", "@daily"
        )

    @pytest.mark.parametrize("name", ["", "Mars/Olympus", "../../etc/passwd", "/etc/localtime", 3])
    def test_unknown_timezones_are_refused(self, name: object) -> None:
        with pytest.raises(CronError, match="timezone"):
            check_timezone(name)


# --------------------------------------------------------------------------- properties

TIMEZONES = [
    "UTC",
    "Europe/Berlin",
    "Europe/Dublin",  # negative DST in the tz database: winter is the "saving" time
    "America/New_York",
    "America/Santiago",
    "America/Sao_Paulo",
    "Australia/Lord_Howe",  # half-hour DST
    "Antarctica/Troll",  # two-hour DST
    "Asia/Tehran",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "Pacific/Apia",
    "Africa/Casablanca",
]


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        st.integers(1, max(1, (high - low) // 2)).map(lambda n: f"*/{n}"),
        value.map(str),
        st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}"),
        st.lists(value, min_size=2, max_size=4, unique=True).map(
            lambda xs: ",".join(map(str, sorted(xs)))
        ),
        st.tuples(value, value, st.integers(1, 5)).map(
            lambda abn: f"{min(abn[:2])}-{max(abn[:2])}/{abn[2]}"
        ),
    )


CRONS = st.tuples(
    _field(0, 59),
    _field(0, 23),
    st.one_of(st.just("*"), _field(1, 28)),
    st.one_of(st.just("*"), _field(1, 12)),
    st.one_of(st.just("*"), _field(0, 6)),
).map(" ".join)


def _transitions(tz: zoneinfo.ZoneInfo, year: int) -> list[dt.datetime]:
    """The instants in ``year`` when the zone's UTC offset changes (to the second)."""
    found = []
    t = dt.datetime(year, 1, 1, tzinfo=UTC)
    offset = t.astimezone(tz).utcoffset()
    while t.year == year:
        n = t + dt.timedelta(hours=6)
        if n.astimezone(tz).utcoffset() != offset:
            low, high = t, n
            while high - low > dt.timedelta(seconds=1):
                mid = low + (high - low) / 2
                low, high = (mid, high) if mid.astimezone(tz).utcoffset() == offset else (low, mid)
            found.append(high)
            offset = n.astimezone(tz).utcoffset()
        t = n
    return found


@st.composite
def ranges(draw: st.DrawFn) -> tuple[str, str, dt.datetime, dt.datetime, dt.datetime]:
    """A cron expression, a timezone and up to a day, half of them around a DST change."""
    timezone = draw(st.sampled_from(TIMEZONES))
    year = draw(st.integers(2000, 2037))
    transitions = _transitions(zoneinfo.ZoneInfo(timezone), year)
    if transitions and draw(st.booleans()):
        start = draw(st.sampled_from(transitions)) + dt.timedelta(
            minutes=draw(st.integers(-30 * 60, 30 * 60)), seconds=draw(st.integers(0, 59))
        )
    else:
        start = dt.datetime(year, 1, 1, tzinfo=UTC) + dt.timedelta(
            minutes=draw(st.integers(0, 365 * 1440))
        )
    length = dt.timedelta(minutes=draw(st.integers(1, 1440)))
    split = start + length * draw(st.floats(0, 1))
    return draw(CRONS), timezone, start, start + length, split


# Short here; the fuzz profile (bash .ci/run fuzz) runs FUZZ_SCALE times as many.
PROPERTY = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.fuzz
@PROPERTY
@given(ranges())
def test_occurrences_strictly_increase_and_split_ranges_agree(case) -> None:
    """The cursor's contract: (a, c] is (a, b] then (b, c], with nothing lost or repeated."""
    expression, timezone, start, end, split = case
    fired = between(expression, timezone, start, end)
    assert all(a < b for a, b in itertools.pairwise(fired))
    assert all(start < t <= end and t.tzinfo is UTC for t in fired)
    assert (
        between(expression, timezone, start, split) + between(expression, timezone, split, end)
        == fired
    )


@pytest.mark.fuzz
@PROPERTY
@given(ranges())
def test_occurrences_match_croniter(case) -> None:
    """croniter's own sequence, less the second instance of a repeated time (fixed hours only)."""
    expression, timezone, start, end, _ = case
    tz = zoneinfo.ZoneInfo(timezone)
    follows_elapsed_time = Cron(expression, timezone).follows_elapsed_time
    expected: list[dt.datetime] = []
    iterator = croniter(expression, start.astimezone(tz))
    while (local := iterator.get_next(dt.datetime)).astimezone(UTC) <= end:
        instant = local.astimezone(UTC)
        repeat = instant.astimezone(tz).fold == 1 and (
            instant.astimezone(tz).replace(fold=0).utcoffset() != instant.astimezone(tz).utcoffset()
        )
        if (expected and instant <= expected[-1]) or (repeat and not follows_elapsed_time):
            continue
        expected.append(instant)
    assert between(expression, timezone, start, end) == expected


@pytest.mark.fuzz
@PROPERTY
@given(ranges())
def test_every_occurrence_is_a_matching_wall_clock_time_and_none_is_missed(case) -> None:
    """An oracle independent of croniter's timezone handling: naive local times and zoneinfo."""
    expression, timezone, start, end, _ = case
    tz = zoneinfo.ZoneInfo(timezone)
    fired = between(expression, timezone, start, end)
    for instant in fired:
        local = instant.astimezone(tz)
        if not croniter.match(expression, local.replace(tzinfo=None)):
            # Only allowed for the instant the clock jumps forward over a matching time.
            assert (instant - dt.timedelta(seconds=1)).astimezone(
                tz
            ).utcoffset() < local.utcoffset()
    # Every matching wall-clock time that exists (once, or the first of two) is in the result.
    naive = croniter(expression, start.astimezone(tz).replace(tzinfo=None) - dt.timedelta(hours=3))
    last_naive = end.astimezone(tz).replace(tzinfo=None) + dt.timedelta(hours=3)
    present = set(fired)
    while (wall := naive.get_next(dt.datetime)) <= last_naive:
        first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        exists = first.astimezone(tz).replace(tzinfo=None) == wall
        if exists and start < first <= end:
            assert first in present, (wall, first)


@pytest.mark.parametrize("expression", ["* * * * *", "30 2 * * *", "*/7 1-3 * * *", "* 2 * * *"])
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Australia/Lord_Howe"])
@pytest.mark.parametrize("count", [1, 7, 500])
def test_last_is_the_tail_of_between_across_dst(expression: str, zone: str, count: int) -> None:
    # Around both of Berlin's 2026 changes (and Lord Howe's half-hour ones): croniter's
    # backward steps know nothing of the DST rule, last() must still agree with between().
    schedule_cron = Cron(expression, zone)
    for floor, ceiling in (
        (dt.datetime(2026, 3, 28, 2, tzinfo=UTC), dt.datetime(2026, 3, 29, 3, tzinfo=UTC)),
        (dt.datetime(2026, 10, 24, 2, tzinfo=UTC), dt.datetime(2026, 10, 25, 2, tzinfo=UTC)),
        (dt.datetime(2026, 4, 3, 14, tzinfo=UTC), dt.datetime(2026, 4, 4, 16, tzinfo=UTC)),
    ):
        every = schedule_cron.between(floor, ceiling)
        assert schedule_cron.last(floor, ceiling, count) == every[-count:]
    assert schedule_cron.last(floor, ceiling, 0) == []


class TestTheEndsOfTheCalendar:
    """Python counts years 1 to 9999: an occurrence past either end cannot be computed."""

    def test_after_ends_where_the_calendar_ends(self) -> None:
        # croniter raised OverflowError (or ValueError) for the occurrence after the last one.
        last_hours = [utc(9999, 12, 31, 22), utc(9999, 12, 31, 23)]
        assert list(Cron("0 * * * *", "UTC").after(utc(9999, 12, 31, 21))) == last_hours
        assert list(Cron("0 0 29 2 *", "UTC").after(utc(9999, 1, 1))) == []  # no leap day left
        # Tokyo's wall clock reaches year 10000 nine hours before UTC does.
        tokyo = Cron("0 * * * *", "Asia/Tokyo")
        assert list(tokyo.after(utc(9999, 12, 31, 13))) == [utc(9999, 12, 31, 14)]

    def test_last_stops_stepping_back_at_year_1(self) -> None:
        # A floor before 0001-01-01T00:00Z (year 1 at +14:00): last() stepped back for ever.
        floor = dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=14)))
        assert Cron("0 * * * *", "UTC").last(floor, utc(1, 1, 1, 3), 10) == [
            utc(1, 1, 1, 1),
            utc(1, 1, 1, 2),
            utc(1, 1, 1, 3),
        ]

    def test_representable_means_readable_in_utc_and_in_the_zone(self) -> None:
        tokyo = zoneinfo.ZoneInfo("Asia/Tokyo")
        assert representable(utc(9999, 12, 31, 14), tokyo)
        assert not representable(utc(9999, 12, 31, 15), tokyo)  # 10000-01-01 00:00 in Tokyo
        assert not representable(
            dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=14))), UTC
        )
        assert representable(utc(1, 1, 1), UTC)
