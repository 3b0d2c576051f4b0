"""A schedule's occurrences: the instants its cron expression names, and which of the due ones
a tick emits or skips under its misfire policy.

Pure cron math on what a ``Schedule`` row holds (its expression, timezone, cursor, policy) and
the database's now, which the caller reads and passes in: no query, so the scheduler
(``runtime/schedules.py``), the read side (``reports/occurrences.py``) and the faces compute
the same instants. The DST rule is :mod:`django_leasejobs.core.cron`'s.

Missed occurrences (no scheduler ran when they were due) follow the schedule's misfire policy:

* ``all``: every occurrence not older than ``catchup_window`` seconds is emitted, oldest first;
* ``latest``: only the newest due occurrence is emitted (if inside the catch-up window);
* ``skip``: only occurrences at most ``LEASEJOBS_MISFIRE_GRACE_SECONDS`` late are emitted.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field
from itertools import islice, takewhile
from typing import Any, Protocol

from ..errors import ScheduleError
from . import cron
from .conf import settings

ALL, LATEST, SKIP = "all", "latest", "skip"
"""The misfire policies (``models.Misfire``'s values)."""

COUNT_CAP = 1000
"""Skipped occurrences are counted up to this many; past it the count is left empty."""

# Looking back for the newest occurrence before an instant: croniter only iterates forward, so
# try growing spans (an hourly look-back finds a per-minute schedule's newest at once).
_LOOK_BACK = [dt.timedelta(seconds=s) for s in (3600, 86400, 32 * 86400, 367 * 86400)]
# Occurrences are whole minutes, so "t < x" is "t <= x - 1 µs".
_MICROSECOND = dt.timedelta(microseconds=1)


class ScheduleLike(Protocol):
    """What the math reads of a ``Schedule`` row."""

    name: str
    cron: str
    timezone: str


class PlannedSchedule(ScheduleLike, Protocol):
    """What a tick's plan reads of a ``Schedule`` row besides its expression."""

    misfire: str
    catchup_window: int
    last_occurrence_at: dt.datetime | None
    created_at: dt.datetime


def cron_of(schedule: ScheduleLike) -> cron.Cron:
    """The schedule's compiled cron expression; ``ScheduleError`` if it cannot be used."""
    try:
        return cron.compile_cron(schedule.cron, schedule.timezone)
    except cron.CronError as exc:
        raise ScheduleError(f"Schedule {schedule.name!r}: {exc}.") from None


def aware(value: Any, name: str) -> dt.datetime:
    """``value`` if it is an aware datetime, else ``ValueError`` naming the argument."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        raise ValueError(f"{name} must be an aware datetime, not {value!r}.")
    return value


def occurrences_between(
    schedule: ScheduleLike, start: dt.datetime, end: dt.datetime
) -> list[dt.datetime]:
    """The occurrences ``t`` of ``schedule`` with ``start < t <= end``, as aware UTC datetimes.

    These are the exact occurrence keys a scheduler emits (``Job.occurrence_at``): the cron
    expression read in the schedule's timezone, with the DST rule of
    :mod:`django_leasejobs.core.cron`.
    """
    return cron_of(schedule).between(aware(start, "start"), aware(end, "end"))


@functools.lru_cache(maxsize=4096)
def first_after(expression: str, timezone: str, instant: dt.datetime) -> dt.datetime | None:
    """The first occurrence after the cursor: cached, so an idle tick does no cron math."""
    return next(cron.compile_cron(expression, timezone).after(instant), None)


def newest(
    schedule_cron: cron.Cron, floor: dt.datetime, ceiling: dt.datetime
) -> dt.datetime | None:
    """The newest occurrence ``t`` with ``floor < t <= ceiling``, or None."""
    for span in _LOOK_BACK:
        lower = max(floor, ceiling - span)
        found = schedule_cron.between(lower, ceiling)
        if found:
            return found[-1]
        if lower == floor:
            return None
    last = None
    for instant in takewhile(lambda t: t <= ceiling, schedule_cron.after(floor)):
        last = instant
    return last


def count(schedule_cron: cron.Cron, after: dt.datetime, through: dt.datetime) -> int | None:
    """How many occurrences ``after < t <= through``; None past ``COUNT_CAP``."""
    due = takewhile(lambda t: t <= through, schedule_cron.after(after))
    counted = sum(1 for _ in islice(due, COUNT_CAP + 1))
    return None if counted > COUNT_CAP else counted


@dataclass
class Plan:
    """What one tick does with one schedule: skip a prefix of the due occurrences, emit the rest."""

    emit: list[dt.datetime] = field(default_factory=list)
    skip_through: dt.datetime | None = None
    skip_count: int | None = None
    skip_reason: str = ""


def plan(
    schedule: PlannedSchedule, schedule_cron: cron.Cron, now: dt.datetime, budget: int
) -> Plan | None:
    """Decide from the cursor and the database's ``now``; None when nothing is due."""
    baseline = schedule.last_occurrence_at or schedule.created_at
    first = first_after(schedule.cron, schedule.timezone, baseline)
    if first is None or first > now:
        return None
    result = Plan()
    if schedule.misfire == SKIP:
        grace = settings.MISFIRE_GRACE_SECONDS
        horizon = now - dt.timedelta(seconds=grace)
        result.skip_reason = f"misfire=skip: missed by more than {grace}s"
    else:
        horizon = now - dt.timedelta(seconds=schedule.catchup_window)
        result.skip_reason = (
            f"misfire={schedule.misfire}: older than the catch-up window "
            f"({schedule.catchup_window}s)"
        )
    if schedule.misfire == LATEST:
        latest = newest(schedule_cron, baseline, now)
        assert latest is not None  # ``first`` is due
        if latest > horizon:
            result.emit = [latest]
            if first < latest:
                result.skip_through = newest(schedule_cron, baseline, latest - _MICROSECOND)
                result.skip_reason = "misfire=latest: only the newest due occurrence runs"
        else:
            result.skip_through = latest
    else:
        lower = max(baseline, horizon)
        due = takewhile(lambda t: t <= now, schedule_cron.after(lower))
        result.emit = list(islice(due, budget))
        if first <= lower:
            result.skip_through = newest(schedule_cron, baseline, lower)
    if result.skip_through is not None:
        result.skip_count = count(schedule_cron, baseline, result.skip_through)
    return result
