"""The per-schedule occurrence view: every occurrence the cron expression yields, beside its job.

An occurrence without a job is a *gap*, and the page says which kind: skipped by the misfire
policy (with the scheduler's recorded reason), emitted but its job since pruned, missed (due,
not emitted: is any scheduler running?), still to come, or from before the schedule existed.
Times are read and shown in the schedule's own timezone, as its cron expression means them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from urllib.parse import urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .. import lifecycle, schedules
from ..models import Job, Schedule
from . import display

MAX_RANGE = dt.timedelta(days=31)
MAX_ROWS = 1000
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
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)

    end_at = parse(end, "end", now)
    start_at = parse(start, "start", end_at - DEFAULT_RANGE)
    if end_at <= start_at:
        raise RangeError("The end of the range must be after its start.")
    if end_at - start_at > MAX_RANGE:
        raise RangeError(f"Ranges are limited to {MAX_RANGE.days} days; narrow the range.")
    return start_at, end_at


NOTES = {
    "emitted": "",
    "pruned": "emitted; its job was deleted since (pruned)",
    "due": "missed: due but not emitted (is a scheduler running?)",
    "upcoming": "upcoming",
}
"""What each state of :func:`schedules.occurrence_history` means to an operator."""


def note(schedule: Schedule, occurrence: schedules.Occurrence) -> str:
    if occurrence.job is None and occurrence.at < schedule.created_at:
        return "before the schedule existed"
    if occurrence.state == "skipped" and occurrence.skip is not None:
        return f"skipped: {occurrence.skip.reason}"
    return NOTES.get(occurrence.state, occurrence.state)


@dataclass
class Table:
    """What the occurrence view shows: rows in time order, and counts over the whole range."""

    rows: list[Row]
    total: int
    """Occurrences in the range (the rows hold at most ``MAX_ROWS`` of them: the latest)."""
    gaps: int
    """Occurrences in the range without a job."""


def rows_between(schedule: Schedule, start: dt.datetime, end: dt.datetime) -> Table:
    """The occurrences of the range beside their jobs; past ``MAX_ROWS``, the latest ones.

    The expected occurrences and their jobs or skip records come from
    :func:`schedules.occurrence_history` (``start < t <= end``), so the admin and the scheduler
    agree on what each occurrence is.
    """
    history = schedules.occurrence_history(schedule, start, end)
    total = len(history)
    gaps = sum(1 for o in history if o.job is None)
    shown = history[-MAX_ROWS:]
    rows = [Row(o.at, o.job, gap=o.job is None, note=note(schedule, o)) for o in shown]
    if total <= MAX_ROWS:
        # Jobs of occurrences the current expression does not yield (the cron was edited).
        expected = {o.at for o in history}
        for job in Job.objects.filter(
            schedule=schedule, occurrence_at__gt=start, occurrence_at__lte=end
        ):
            if job.occurrence_at is not None and job.occurrence_at not in expected:
                rows.append(
                    Row(job.occurrence_at, job, note="not an occurrence of the current cron")
                )
    rows.sort(key=lambda row: row.at)
    zone = schedule_zone(schedule)
    for row in rows:
        row.at = row.at.astimezone(zone)
    return Table(rows, total, gaps)


def database_now() -> dt.datetime:
    return lifecycle.db_now()
