"""What became of a schedule's occurrences, and which come next: the read side of schedules.

The admin's occurrence view, the API's and ``schedules.occurrence_history`` read here: each
expected occurrence (``core/occurrences.py`` computes them) beside its job, its skip record or
the gap it left, and the next occurrences after the database's now.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from itertools import islice

from ..core import occurrences
from ..core.occurrences import occurrences_between
from ..db import dbtime
from ..models import Job, Schedule, ScheduleSkip
from ..models.databases import job_database


def next_occurrences(
    schedule: Schedule, count: int = 10, after: dt.datetime | None = None
) -> list[dt.datetime]:
    """The next ``count`` occurrences after ``after`` (default: the database's now)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative integer, not {count!r}.")
    start = dbtime.db_now() if after is None else occurrences.aware(after, "after")
    return list(islice(occurrences.cron_of(schedule).after(start), count))


@dataclass(frozen=True)
class Occurrence:
    """One expected occurrence of a schedule beside what became of it (the admin's gap view)."""

    at: dt.datetime
    state: str
    """``emitted`` (``job`` is set), ``skipped`` (``skip`` says why), ``pruned`` (at or before the
    cursor with neither: its job was deleted), ``due`` (after the cursor, not yet emitted: no
    scheduler has ticked since) or ``upcoming``."""
    job: Job | None = None
    skip: ScheduleSkip | None = None


def occurrence_history(
    schedule: Schedule, start: dt.datetime, end: dt.datetime
) -> list[Occurrence]:
    """Every occurrence ``start < t <= end`` with its job or skip record; gaps are explicit."""
    return history_of(schedule, occurrences_between(schedule, start, end))


def history_of(schedule: Schedule, expected: list[dt.datetime]) -> list[Occurrence]:
    """These occurrences of ``schedule`` (in order) with their jobs or skip records.

    For a page of a long range: the caller computes only the occurrences it shows.
    """
    if not expected:
        return []
    jobs = {
        job.occurrence_at: job
        for job in Job.objects.using(job_database()).filter(
            schedule=schedule, occurrence_at__gte=expected[0], occurrence_at__lte=expected[-1]
        )
    }
    skips = list(
        ScheduleSkip.objects.using(job_database()).filter(
            schedule=schedule, through__gte=expected[0], after__lt=expected[-1]
        )
    )
    cursor, now = schedule.last_occurrence_at, dbtime.db_now()
    history = []
    for at in expected:
        job = jobs.get(at)
        skip = next((s for s in skips if s.after < at <= s.through), None)
        if job is not None:
            state = "emitted"
        elif skip is not None:
            state = "skipped"
        elif cursor is not None and at <= cursor:
            state = "pruned"
        else:
            state = "due" if at <= now else "upcoming"
        history.append(Occurrence(at, state, job, skip))
    return history
