"""The per-schedule occurrence view: every occurrence the cron expression yields, beside its job.

An occurrence without a job is a *gap*, and the page says which kind: skipped by the misfire
policy (with the scheduler's recorded reason), emitted but its job since pruned, missed (due,
not emitted: is any scheduler running?), still to come, or from before the schedule existed.
Times are read and shown in the schedule's own timezone, as its cron expression means them.

A range is shown a page of at most ``PAGE_SIZE`` occurrences at a time, the latest first, with
links to the earlier and later pages. A page computes only its own occurrences (plus one on
each side to know whether there is more), so a 31-day range of a per-minute schedule costs a
request no more than a range of a few hours.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice, takewhile
from urllib.parse import urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..core.cron import representable
from ..core.occurrences import cron_of
from ..db import dbtime
from ..models import Job, Schedule
from ..models.databases import job_database
from ..reports.occurrences import Occurrence, history_of
from . import display

MAX_RANGE = dt.timedelta(days=31)
PAGE_SIZE = 500
"""Occurrences per page; a page also lists up to as many jobs the current cron does not yield."""
DEFAULT_RANGE = dt.timedelta(hours=24)
QUICK_RANGES = (("last hour", 1), ("last 24 hours", 24), ("last 7 days", 24 * 7))
"""Links above the table: (label, hours back from now)."""


INPUT_FORMAT = "%Y-%m-%dT%H:%M"
"""What an ``<input type="datetime-local">`` sends (seconds are accepted too)."""


def quick_links(base: str, now: dt.datetime, zone: dt.tzinfo) -> list[tuple[str, str]]:
    """(label, url) for the preset ranges, ending now, in the schedule's timezone."""
    end = now.astimezone(zone)
    return [
        (
            label,
            f"{base}?"
            + urlencode(
                {
                    "start": (end - dt.timedelta(hours=hours)).strftime(INPUT_FORMAT),
                    "end": end.strftime(INPUT_FORMAT),
                }
            ),
        )
        for label, hours in QUICK_RANGES
    ]


class RangeError(ValueError):
    """The requested time range cannot be shown; the message says why."""


@dataclass
class Row:
    """One line of the table: an expected occurrence, or a job the current cron does not yield."""

    at: dt.datetime
    job: Job | None
    note: str = ""
    gap: bool = False

    @property
    def label(self) -> str:
        """The occurrence in its own timezone (the template's ``date`` filter would convert it
        to the site's timezone)."""
        return self.at.strftime("%Y-%m-%d %H:%M %Z")

    @property
    def started(self) -> str:
        if self.job is None or self.job.started_at is None:
            return "\u2014"
        return self.job.started_at.astimezone(self.at.tzinfo).strftime("%Y-%m-%d %H:%M:%S")

    @property
    def duration(self) -> str:
        if self.job is None:
            return ""
        return display.human_duration(display.duration(self.job.started_at, self.job.finished_at))


def schedule_zone(schedule: Schedule) -> dt.tzinfo:
    try:
        return ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return dt.timezone.utc


def parse_range(
    schedule: Schedule, start: str | None, end: str | None, now: dt.datetime
) -> tuple[dt.datetime, dt.datetime]:
    """Read ``start``/``end`` (ISO, naive means the schedule's timezone); default: last 24 h."""
    zone = schedule_zone(schedule)

    def parse(value: str | None, name: str, default: dt.datetime) -> dt.datetime:
        if not value:
            return default
        try:
            parsed = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise RangeError(
                f"{name} {value!r} is not a date and time (use YYYY-MM-DDTHH:MM)."
            ) from None
        parsed = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)
        return readable(parsed, name, value, zone)

    end_at = parse(end, "end", now)
    try:
        default_start = end_at - DEFAULT_RANGE
    except OverflowError:  # an end on 1 January of year 1
        default_start = end_at
    start_at = parse(start, "start", default_start)
    if end_at <= start_at:
        raise RangeError("The end of the range must be after its start.")
    if end_at - start_at > MAX_RANGE:
        raise RangeError(f"Ranges are limited to {MAX_RANGE.days} days; narrow the range.")
    return start_at, end_at


def readable(instant: dt.datetime, name: str, value: str, zone: dt.tzinfo) -> dt.datetime:
    """``instant``, if it can be read in UTC and in the schedule's timezone: at the ends of
    years 1 and 9999 an offset carries it out of Python's calendar (an ``OverflowError``)."""
    if not representable(instant, zone):
        raise RangeError(f"{name} {value!r} falls outside the years 1 to 9999 in UTC or in {zone}.")
    return instant


NOTES = {
    "emitted": "",
    "pruned": "emitted; its job was deleted since (pruned)",
    "due": "missed: due but not emitted (is a scheduler running?)",
    "upcoming": "upcoming",
}
"""What each state of :func:`occurrence_history` means to an operator."""


def note(schedule: Schedule, occurrence: Occurrence) -> str:
    if occurrence.job is None and occurrence.at < schedule.created_at:
        return "before the schedule existed"
    if occurrence.state == "skipped" and occurrence.skip is not None:
        return f"skipped: {occurrence.skip.reason}"
    return NOTES.get(occurrence.state, occurrence.state)


@dataclass
class Table:
    """One page of the occurrence view: rows in time order, and where the next pages start.

    The page covers the occurrences ``t`` with ``lower < t <= upper``: the pages of a range cut
    it into consecutive intervals, so walking them shows each occurrence (and each job) once.
    """

    rows: list[Row]
    shown: int
    """Occurrences on this page (the rows also hold jobs the current cron does not yield)."""
    gaps: int
    """Occurrences on this page without a job."""
    earlier: dt.datetime | None
    """``until`` of the page before this one, or None when this page starts the range."""
    later: dt.datetime | None
    """``after`` of the page after this one, or None when this page ends the range."""

    @property
    def span(self) -> str:
        """The first and last time on the page, for the summary above the table."""
        return f"{self.rows[0].label} to {self.rows[-1].label}" if self.rows else ""

    @property
    def whole(self) -> bool:
        """The range fits on this page."""
        return self.earlier is None and self.later is None


def page_bounds(
    schedule: Schedule,
    start: dt.datetime,
    end: dt.datetime,
    after: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> tuple[list[dt.datetime], dt.datetime, dt.datetime]:
    """A page's occurrences and its interval ``(lower, upper]`` within ``(start, end]``.

    ``after``: the first ``PAGE_SIZE`` occurrences after it; otherwise the last ``PAGE_SIZE``
    up to ``until`` (default ``end``). One more is computed to know where the next page starts.
    """
    cron = cron_of(schedule)
    # A cursor is held within the range, whose ends parse_range made sure can be computed: a
    # link edited to year 9999 in another offset would overflow the cron arithmetic.
    if after is not None:
        lower = min(max(start, after), end)
        found = list(islice(takewhile(lambda t: t <= end, cron.after(lower)), PAGE_SIZE + 1))
        if len(found) > PAGE_SIZE:
            return found[:PAGE_SIZE], lower, found[PAGE_SIZE - 1]
        return found, lower, end
    upper = end if until is None else max(start, min(end, until))
    found = cron.last(start, upper, PAGE_SIZE + 1)
    if len(found) > PAGE_SIZE:
        return found[1:], found[0], upper
    return found, start, upper


def page_between(
    schedule: Schedule,
    start: dt.datetime,
    end: dt.datetime,
    after: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> Table:
    """One page of the range (see :func:`page_bounds`) beside the occurrences' jobs.

    The states come from :func:`history_of`, so the admin and the scheduler agree on
    what each occurrence is.
    """
    expected, lower, upper = page_bounds(schedule, start, end, after, until)
    history = history_of(schedule, expected)
    rows = [Row(o.at, o.job, gap=o.job is None, note=note(schedule, o)) for o in history]
    # Jobs of occurrences the current expression does not yield (the cron was edited).
    for job in (
        Job.objects.using(job_database())
        .filter(schedule=schedule, occurrence_at__gt=lower, occurrence_at__lte=upper)
        .exclude(occurrence_at__in=expected)
        .order_by("occurrence_at")[:PAGE_SIZE]
    ):
        if job.occurrence_at is not None:  # the filter says so; mypy cannot know
            rows.append(Row(job.occurrence_at, job, note="not an occurrence of the current cron"))
    rows.sort(key=lambda row: row.at)
    zone = schedule_zone(schedule)
    for row in rows:
        row.at = row.at.astimezone(zone)
    cron = cron_of(schedule)
    return Table(
        rows,
        shown=len(history),
        gaps=sum(1 for o in history if o.job is None),
        earlier=lower if _any(cron.after(start), lower) else None,
        later=upper if _any(cron.after(upper), end) else None,
    )


def _any(occurrences: Iterator[dt.datetime], through: dt.datetime) -> bool:
    """The first of ``occurrences`` is at or before ``through``: one step of the cron."""
    first = next(occurrences, None)
    return first is not None and first <= through


def parse_cursor(value: str | None, name: str) -> dt.datetime | None:
    """``after``/``until`` of a page link: an ISO instant with its offset, as the links write it."""
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise RangeError(f"{name} {value!r} is not a page of this view (follow its links).")
    return parsed


def page_links(base: str, query: dict[str, str], table: Table) -> dict[str, str]:
    """URLs of the earlier and later pages: the same range, the next interval."""
    links = {}
    if table.earlier is not None:
        links["earlier"] = f"{base}?" + urlencode({**query, "until": table.earlier.isoformat()})
    if table.later is not None:
        links["later"] = f"{base}?" + urlencode({**query, "after": table.later.isoformat()})
    return links


def database_now() -> dt.datetime:
    return dbtime.db_now()
