"""Cron math in a schedule's timezone: which instants a cron expression names, in UTC.

croniter does the calendar arithmetic; this module adds the two things a scheduler needs on top:
refusing bad input with a message a user can act on, and one firm rule for daylight saving time,
so that every scheduler process (and the admin's "next occurrences") computes the same instants.

The DST rule (the Vixie cron rule, stated in docs/recurrence.md):

* A wall-clock time that does not exist (the hour skipped when clocks spring forward) fires at
  the instant the clock jumps, e.g. "30 2 * * *" in Europe/Berlin fires at 03:00 CEST (01:00 UTC)
  on the spring-forward day. Several skipped times collapse into that one instant.
* A wall-clock time that happens twice (the hour repeated when clocks fall back) fires once, at
  its first instance (summer time), e.g. 02:30 CEST (00:30 UTC) on the fall-back day...
* ...unless the expression's hour field is ``*`` (it runs every hour): such a schedule follows
  elapsed time instead, so a per-minute or hourly schedule keeps firing through the repeated hour
  and simply has nothing to fire in the skipped one.

Occurrences are whole minutes, returned as aware UTC datetimes, strictly increasing.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from collections.abc import Iterator

from croniter import CroniterBadDateError, CroniterError, croniter

UTC = dt.timezone.utc

ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
"""The ``@`` shorthands croniter understands that name a time (``@reboot`` does not)."""

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")

_RANDOM_OR_HASHED = re.compile(r"[HR](\(\d+-\d+\))?(/\d+)?", re.ASCII | re.IGNORECASE)
"""croniter's ``R`` (random) and ``H`` (hashed) fields, in the forms it reads them in."""

# How far before croniter's backward estimate to start iterating forward: more than any zone's
# offset change, so the estimate (which knows nothing of the DST rule) is never too late.
_BACK_MARGIN = dt.timedelta(hours=3)

# A cron expression that matches nothing (Feb 30) makes croniter search for years; a valid one
# matches within 28 years (Feb 29 on a given weekday). Checked once, at compile time.
_PROBE_FROM = dt.datetime(2001, 1, 1, tzinfo=UTC)


class CronError(ValueError):
    """A cron expression or timezone that cannot be used; the message says why."""


class Cron:
    """A validated cron expression in a timezone: iterate the UTC instants it names."""

    def __init__(self, expression: str, timezone: str) -> None:
        self.expression = check_expression(expression)
        self.timezone = timezone
        self.tz = check_timezone(timezone)
        hours = croniter.expand(self.expression)[0][1]
        self.follows_elapsed_time = hours == ["*"] or len(set(hours)) == 24
        """True when the hour field matches every hour: DST repeats fire again (see module)."""

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, {self.timezone!r})"

    def after(self, start: dt.datetime) -> Iterator[dt.datetime]:
        """Occurrences strictly after ``start`` (aware), in order, as UTC datetimes; endless."""
        if start.tzinfo is None:
            raise ValueError("Cron.after() needs an aware datetime.")
        # croniter iterates from the local wall-clock time; it keeps the fold of the start, so a
        # start inside a repeated hour continues from the right instance of it.
        iterator = croniter(self.expression, start.astimezone(self.tz))
        last = start.astimezone(UTC)
        while True:
            try:
                local = iterator.get_next(dt.datetime)
                instant = local.astimezone(UTC)
            except CroniterBadDateError:
                return  # no further match (croniter searches a bounded number of years)
            except (OverflowError, ValueError):
                # Past 31 December 9999, where Python's calendar ends: croniter (or the
                # conversion to UTC) raises instead of yielding. Nothing comes after that.
                return
            if instant <= last:
                # Several skipped wall-clock times collapse into the instant the clock jumps.
                continue
            if not self.follows_elapsed_time and _is_repeat(instant, self.tz):
                continue
            last = instant
            yield instant

    def between(self, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
        """Occurrences ``t`` with ``start < t <= end``."""
        found = []
        for instant in self.after(start):
            if instant > end:
                break
            found.append(instant)
        return found

    def last(self, floor: dt.datetime, ceiling: dt.datetime, count: int) -> list[dt.datetime]:
        """The last ``count`` occurrences ``t`` with ``floor < t <= ceiling``, in order.

        For a page of the newest occurrences of a long range without computing all of it:
        croniter steps back ``count`` times to estimate where they begin, then :meth:`after`
        yields them forward, so they follow the DST rule exactly. An estimate that falls short
        (skipped times that collapse) steps back again.
        """
        if count < 1:
            return []
        lower = ceiling
        while True:
            back = self._back(lower, count)
            lower = max(floor, back)
            found = self.between(lower, ceiling)
            # At _EARLIEST nothing earlier can be counted: a floor before it (an instant of
            # year 1 with a positive offset) would step back to the same place for ever.
            if len(found) >= count or lower == floor or back == _EARLIEST:
                return found[-count:]

    def _back(self, instant: dt.datetime, steps: int) -> dt.datetime:
        """An instant at least ``steps`` matches of the expression before ``instant``."""
        iterator = croniter(self.expression, instant.astimezone(self.tz))
        try:
            for _ in range(steps):
                local = iterator.get_prev(dt.datetime)
            return local.astimezone(UTC) - _BACK_MARGIN
        except (CroniterError, ValueError, OverflowError):
            # Nothing earlier within croniter's reach, or before year 1: the caller's floor.
            return _EARLIEST


_EARLIEST = dt.datetime.min.replace(tzinfo=UTC)
"""The first instant Python can count (year 1, UTC): where stepping back ends."""


def representable(instant: dt.datetime, tz: dt.tzinfo) -> bool:
    """Can ``instant`` (aware) be read in UTC and in ``tz``? Python's calendar ends at years
    1 and 9999, and an offset carries ``0001-01-01T00:00+14:00`` or ``9999-12-31T23:59-12:00``
    past either end: any conversion of such an instant raises ``OverflowError``."""
    try:
        instant.astimezone(UTC)
        instant.astimezone(tz)
    except OverflowError:
        return False
    return True


def _is_repeat(instant: dt.datetime, tz: zoneinfo.ZoneInfo) -> bool:
    """True if ``instant`` is the second instance of a wall-clock time that happens twice."""
    local = instant.astimezone(tz)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def check_expression(expression: object) -> str:
    """Return the expression (stripped) or raise ``CronError`` saying what is wrong with it."""
    if not isinstance(expression, str):
        raise CronError(f"a cron expression is a string, not {type(expression).__name__}")
    text = " ".join(expression.split())
    if not text:
        raise CronError("the cron expression is empty")
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            raise CronError(
                f"unknown shorthand {text!r} (use one of {', '.join(ALIASES)} or five fields)"
            )
        text = text.lower()
    elif len(text.split()) != 5:
        raise CronError(
            f"{len(text.split())} fields; a cron expression has exactly five: "
            "minute hour day-of-month month day-of-week (no seconds field)"
        )
    else:
        _refuse_random_fields(text.split())
    try:
        probe = croniter(text, _PROBE_FROM)
    except CroniterError as exc:
        raise CronError(str(exc)) from None
    except (ValueError, TypeError, KeyError, IndexError) as exc:  # croniter's less tidy errors
        raise CronError(f"cannot parse it ({exc})") from None
    try:
        probe.get_next(dt.datetime)
    except CroniterBadDateError:
        raise CronError("it never matches a date (like 30 February)") from None
    return text


def _refuse_random_fields(fields: list[str]) -> None:
    """Refuse croniter's ``R`` and ``H``: it picks ``R`` afresh each time it reads the
    expression (and ``H`` from a seed it is not given here), so no two schedulers, nor two
    ticks of one, would agree on the occurrences, and a schedule could fire twice an hour."""
    for name, field in zip(FIELDS, fields, strict=True):
        if _RANDOM_OR_HASHED.fullmatch(field):
            kind = "random value (R)" if field[0] in "Rr" else "hashed value (H)"
            raise CronError(
                f"the {name} field {field!r} is a {kind}: Hashed (H) and random (R) fields are "
                "refused, because every scheduler and every tick would pick a different value; "
                "write the value you want (for example 17)"
            )


def check_timezone(name: object) -> zoneinfo.ZoneInfo:
    """Return the IANA timezone or raise ``CronError`` naming the problem."""
    if not isinstance(name, str) or not name:
        raise CronError(f"a timezone is an IANA name like 'Europe/Paris', not {name!r}")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(
            f"unknown timezone {name!r} (use an IANA name like 'Europe/Paris')"
        ) from None


@functools.lru_cache(maxsize=512)
def compile_cron(expression: str, timezone: str) -> Cron:
    """A cached ``Cron``: schedulers tick every second, parsing once is enough."""
    return Cron(expression, timezone)
