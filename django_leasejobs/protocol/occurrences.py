"""Occurrences of cron schedules: each emitted once, however many schedulers run.

No leader: a compare-and-set on the schedule's cursor and the unique (schedule, occurrence)
key are the only authority, and the cursor moves in the same transaction as the job it emits.
"""

from __future__ import annotations

import datetime as dt

from django.db import IntegrityError, transaction
from django.db.models import Q

from .. import dialects
from ..models import Job, Schedule, ScheduleSkip
from .base import job_database, logger, send_enqueued_signal
from .new_rows import row_values


def _advance_cursor(alias: str, schedule: Schedule, to: dt.datetime) -> bool:
    """Compare-and-set the schedule's cursor from the value this scheduler read to ``to``.

    The guard is the whole of the once-per-occurrence protocol between schedulers: whoever moves
    the cursor first owns the occurrences up to ``to``; a concurrent scheduler's UPDATE then
    matches no row (PostgreSQL re-checks the WHERE on the row it waited for) and it backs off.
    """
    expected = schedule.last_occurrence_at
    if expected is not None and to <= expected:
        raise ValueError(f"A schedule's cursor only moves forward ({expected} -> {to}).")
    guard = Q(pk=schedule.pk) & (
        Q(last_occurrence_at__isnull=True) if expected is None else Q(last_occurrence_at=expected)
    )
    return bool(Schedule.objects.using(alias).filter(guard).update(last_occurrence_at=to))


def _cursor_lost(alias: str, schedule: Schedule, action: str, occurrence_at: dt.datetime) -> None:
    """Another scheduler moved the cursor first: read where it is now, and say so."""
    seen = schedule.last_occurrence_at
    schedule.last_occurrence_at = (
        Schedule.objects.using(alias)
        .filter(pk=schedule.pk)
        .values_list("last_occurrence_at", flat=True)
        .first()
    )
    logger.debug(
        "schedule.cursor_moved name=%s action=%s occurrence=%s expected=%s found=%s",
        schedule.name,
        action,
        occurrence_at.isoformat(),
        seen.isoformat() if seen else None,
        schedule.last_occurrence_at.isoformat() if schedule.last_occurrence_at else None,
    )


def emit_occurrence(
    schedule: Schedule, occurrence_at: dt.datetime, run_at: dt.datetime
) -> Job | None:
    """Emit one occurrence of a schedule as a job, and move its cursor, in one transaction.

    Guarded twice: the cursor moves from the value on ``schedule`` (compare-and-set), and the
    INSERT is insert-or-ignore on the unique (schedule, occurrence_at) key, so no interleaving of
    schedulers makes two jobs for one occurrence. Both commit together or not at all: a scheduler
    killed in between leaves neither, and the next tick emits the occurrence (no gap).

    Returns the job, or None when nothing was inserted: either another scheduler had already
    moved the cursor (``schedule.last_occurrence_at`` is then refreshed from the database and is
    not ``occurrence_at``), or the occurrence's job already existed (the cursor had been moved
    back by hand; it now stands at ``occurrence_at``). Raises ``JobValidationError`` before
    writing anything if the schedule's job or arguments are not valid.
    """
    alias = job_database()
    values = row_values(
        schedule.job,
        schedule.args,
        schedule.kwargs,
        run_at=run_at,
        queue=schedule.queue or None,
        priority=schedule.priority,
        max_attempts=schedule.max_attempts,
    )
    values.update(schedule_id=schedule.pk, occurrence_at=occurrence_at)
    dialect = dialects.for_alias(alias)
    job: Job | None = None
    with transaction.atomic(using=alias):
        advanced = _advance_cursor(alias, schedule, occurrence_at)
        if advanced:
            try:
                with transaction.atomic(using=alias):  # a savepoint: the cursor move survives
                    job = dialect.insert(alias, values)
            except IntegrityError:
                logger.warning(
                    "schedule.occurrence_exists name=%s occurrence=%s",
                    schedule.name,
                    occurrence_at.isoformat(),
                )
    if not advanced:
        _cursor_lost(alias, schedule, "emit", occurrence_at)
        return None
    schedule.last_occurrence_at = occurrence_at
    if job is None:
        return None
    send_enqueued_signal(job, alias)
    logger.info(
        "schedule.emitted name=%s occurrence=%s job=%s run_at=%s",
        schedule.name,
        occurrence_at.isoformat(),
        job.pk,
        run_at.isoformat(),
    )
    return job


def skip_occurrences(
    schedule: Schedule, through: dt.datetime, *, count: int | None, reason: str
) -> bool:
    """Record occurrences up to ``through`` as skipped and move the cursor past them, at once.

    The same compare-and-set as ``emit_occurrence``; False (and a refreshed cursor on
    ``schedule``) when another scheduler moved the cursor first.
    """
    alias = job_database()
    after = schedule.last_occurrence_at or schedule.created_at
    with transaction.atomic(using=alias):
        moved = _advance_cursor(alias, schedule, through)
        if moved:
            ScheduleSkip.objects.using(alias).create(
                schedule_id=schedule.pk, after=after, through=through, count=count, reason=reason
            )
    if not moved:
        _cursor_lost(alias, schedule, "skip", through)
        return False
    schedule.last_occurrence_at = through
    logger.warning(
        "schedule.skipped name=%s after=%s through=%s count=%s reason=%s",
        schedule.name,
        after.isoformat(),
        through.isoformat(),
        count if count is not None else "many",
        reason,
    )
    return True


def pass_occurrences(schedule: Schedule, through: dt.datetime) -> bool:
    """Move the cursor to ``through`` with nothing to emit or skip on the way (the caller
    emitted every occurrence up to it): ``testing.travel()``, where time a scheduler "ran
    through" ends between two occurrences. The same compare-and-set as ``emit_occurrence``."""
    alias = job_database()
    if not _advance_cursor(alias, schedule, through):
        _cursor_lost(alias, schedule, "pass", through)
        return False
    schedule.last_occurrence_at = through
    return True
