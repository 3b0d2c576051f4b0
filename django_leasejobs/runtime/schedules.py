"""The scheduler's tick: every due occurrence of every enabled schedule emitted as a job or
recorded as skipped (the cron math is ``core/occurrences.py``, what became of each occurrence
``reports/occurrences.py``, the sync from settings ``upkeep/schedule_sync.py``).

Any number of processes may run ``tick()`` at the same time; there is no leader. What keeps each
occurrence to one job is the schedule's cursor (``last_occurrence_at``), moved forward by a
compare-and-set in the same transaction as the job's INSERT, with the unique
(schedule, occurrence_at) key behind it (see ``protocol.emit_occurrence``). Occurrences derive
from the cron expression and the cursor only, never from process uptime or the jobs table, so
restarts, pruning and clock skew between workers change nothing: "now" is the database's.

Missed occurrences (no scheduler ran when they were due) follow the schedule's misfire policy
(``core/occurrences.py`` states the three). Whatever is not emitted is recorded as a
``ScheduleSkip`` before the cursor passes it, so the admin can show it as a gap with its reason.
"""

from __future__ import annotations

import datetime as dt
import logging
import random

from django.db import DatabaseError

from .. import protocol
from ..core import occurrences, registry
from ..db.dbtime import DbNow
from ..errors import ScheduleError, UnknownJobError
from ..models import Misfire, Schedule

logger = logging.getLogger("django_leasejobs")


def _run_at(schedule: Schedule, occurrence_at: dt.datetime) -> dt.datetime:
    """The occurrence plus a random offset in [0, jitter]: spreads "on the hour" spikes."""
    if schedule.jitter <= 0:
        return occurrence_at
    return occurrence_at + dt.timedelta(seconds=random.uniform(0, schedule.jitter))


def _tick_schedule(schedule: Schedule, now: dt.datetime, budget: int) -> int:
    schedule_cron = occurrences.cron_of(schedule)
    if schedule.misfire not in Misfire.values:
        raise ScheduleError(
            f"Schedule {schedule.name!r}: unknown misfire policy {schedule.misfire!r}."
        )
    # An unknown job moves nothing: fix the code, and it resumes. Found as a worker finds a
    # row's job: its module imported if the allow-list has it.
    registry.find(schedule.job)
    plan = occurrences.plan(schedule, schedule_cron, now, budget)
    if plan is None:
        return 0
    if plan.skip_through is not None and not protocol.skip_occurrences(
        schedule, plan.skip_through, count=plan.skip_count, reason=plan.skip_reason
    ):
        return 0  # another scheduler is ahead on this schedule; it emits what is due
    emitted = 0
    for occurrence_at in plan.emit:
        job = protocol.emit_occurrence(schedule, occurrence_at, _run_at(schedule, occurrence_at))
        if schedule.last_occurrence_at != occurrence_at:
            break
        emitted += job is not None
    return emitted


PASS_LIMIT = 1000
"""Occurrences of one schedule that one ``pass_time()`` emits at most."""


def pass_time(seconds: float) -> int:
    """Emit what a scheduler running for the next ``seconds`` would emit (``testing.travel``).

    Time does not move; each schedule's does. A schedule's own "now" is its cursor when a
    travel left it ahead of the database's clock, else the database's now; every occurrence
    from there to ``seconds`` later is emitted on time (a scheduler ran through them, so no
    misfire policy applies) with its ``run_at`` as far ahead of its schedule's now as it would
    be, and the cursor moves to the end: a later travel goes on from there. The caller moves
    the waiting jobs' ``run_at`` back by ``seconds``, these included, which makes them due.
    Returns how many jobs were emitted; ``ValueError`` if a schedule would emit more than
    ``PASS_LIMIT`` (nothing is emitted then).
    """
    due = list(
        Schedule.objects.using(protocol.job_database())
        .filter(enabled=True)
        .annotate(db_now=DbNow())
        .order_by("pk")
    )
    span = dt.timedelta(seconds=seconds)
    plans = []
    for schedule in due:
        now = (
            schedule.db_now
            if schedule.db_now.tzinfo
            else schedule.db_now.replace(tzinfo=dt.timezone.utc)
        )
        start = max(now, schedule.last_occurrence_at or schedule.created_at)
        end = start + span
        try:
            registry.find(schedule.job)
            schedule_cron = occurrences.cron_of(schedule)
        except (ScheduleError, UnknownJobError):
            continue  # broken: ``tick()`` reported it, and passes over it too
        emit: list[dt.datetime] = []
        for occurrence_at in schedule_cron.after(start):
            if occurrence_at > end or len(emit) > PASS_LIMIT:
                break
            emit.append(occurrence_at)
        if len(emit) > PASS_LIMIT:
            raise ValueError(
                f"Moving time {seconds:g} s passes more than {PASS_LIMIT} occurrences of "
                f"schedule {schedule.name!r}: move it in smaller steps."
            )
        plans.append((schedule, start - now, end, emit))
    emitted = 0
    for schedule, ahead, end, emit in plans:
        for occurrence_at in emit:
            run_at = _run_at(schedule, occurrence_at) - ahead
            emitted += protocol.emit_occurrence(schedule, occurrence_at, run_at) is not None
        if schedule.last_occurrence_at is None or schedule.last_occurrence_at < end:
            protocol.pass_occurrences(schedule, end)
    return emitted


_broken: dict[int, str] = {}


def tick(*, limit: int = 1000) -> int:
    """Emit every due occurrence of every enabled schedule; return how many jobs were emitted.

    Safe to run from any number of processes at once. ``limit`` bounds the work of one call (a
    long catch-up continues on the next). A schedule that cannot run (bad cron expression,
    unknown timezone or job) is logged once and passed over; the others still tick. Database
    errors propagate, for the worker's reconnect logic.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, not {limit!r}.")
    # The database's now comes with the schedules: an idle tick is this one query.
    due = list(
        Schedule.objects.using(protocol.job_database())
        .filter(enabled=True)
        .annotate(db_now=DbNow())
    )
    if not due:
        return 0
    now: dt.datetime = due[0].db_now
    if now.tzinfo is None:  # USE_TZ = False: the database's clock is read as UTC
        now = now.replace(tzinfo=dt.timezone.utc)
    emitted = 0
    # A random order per tick: schedulers that tick together spread over different schedules
    # instead of all queueing on the first row's lock and losing the same compare-and-set.
    random.shuffle(due)
    for schedule in due:
        if emitted >= limit:
            break
        try:
            emitted += _tick_schedule(schedule, now, limit - emitted)
        except DatabaseError:
            raise
        except Exception as exc:
            _report_broken(schedule, exc)
        else:
            _broken.pop(schedule.pk, None)
    return emitted


def _report_broken(schedule: Schedule, exc: Exception) -> None:
    """Log a broken schedule at ERROR once per distinct problem, not once per tick."""
    message = str(exc)
    if _broken.get(schedule.pk) == message:
        logger.debug("schedule.broken name=%s error=%s", schedule.name, message)
        return
    _broken[schedule.pk] = message
    logger.error(
        "schedule.broken name=%s error=%s (other schedules keep running)",
        schedule.name,
        message,
        exc_info=not isinstance(exc, ValueError | LookupError),
    )
