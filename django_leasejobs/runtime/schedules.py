"""Cron schedules: their occurrences and the scheduler tick (the sync from settings is
``schedule_settings``).

Any number of processes may run ``tick()`` at the same time; there is no leader. What keeps each
occurrence to one job is the schedule's cursor (``last_occurrence_at``), moved forward by a
compare-and-set in the same transaction as the job's INSERT, with the unique
(schedule, occurrence_at) key behind it (see ``protocol.emit_occurrence``). Occurrences derive
from the cron expression and the cursor only, never from process uptime or the jobs table, so
restarts, pruning and clock skew between workers change nothing: "now" is the database's.

Missed occurrences (no scheduler ran when they were due) follow the schedule's misfire policy:

* ``all``: every occurrence not older than ``catchup_window`` seconds is emitted, oldest first;
* ``latest``: only the newest due occurrence is emitted (if inside the catch-up window);
* ``skip``: only occurrences at most ``LEASEJOBS_MISFIRE_GRACE_SECONDS`` late are emitted.

Whatever is not emitted is recorded as a ``ScheduleSkip`` before the cursor passes it, so the
admin can show it as a gap with its reason.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import random
from dataclasses import dataclass, field
from itertools import islice, takewhile
from typing import Any

from django.db import DatabaseError

from .. import protocol
from ..core import cron, registry
from ..core.conf import settings
from ..db import dbtime
from ..db.dbtime import DbNow
from ..errors import ScheduleError, UnknownJobError
from ..models import Job, Misfire, Schedule, ScheduleSkip

logger = logging.getLogger("django_leasejobs")

COUNT_CAP = 1000
"""Skipped occurrences are counted up to this many; past it the count is left empty."""

# Looking back for the newest occurrence before an instant: croniter only iterates forward, so
# try growing spans (an hourly look-back finds a per-minute schedule's newest at once).
_LOOK_BACK = [dt.timedelta(seconds=s) for s in (3600, 86400, 32 * 86400, 367 * 86400)]
# Occurrences are whole minutes, so "t < x" is "t <= x - 1 µs".
_MICROSECOND = dt.timedelta(microseconds=1)


# --------------------------------------------------------------------------- occurrences


def _cron(schedule: Schedule) -> cron.Cron:
    try:
        return cron.compile_cron(schedule.cron, schedule.timezone)
    except cron.CronError as exc:
        raise ScheduleError(f"Schedule {schedule.name!r}: {exc}.") from None


def cron_of(schedule: Schedule) -> cron.Cron:
    """The schedule's compiled cron expression; ``ScheduleError`` if it cannot be used."""
    return _cron(schedule)


def _aware(value: Any, name: str) -> dt.datetime:
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        raise ValueError(f"{name} must be an aware datetime, not {value!r}.")
    return value


def occurrences_between(
    schedule: Schedule, start: dt.datetime, end: dt.datetime
) -> list[dt.datetime]:
    """The occurrences ``t`` of ``schedule`` with ``start < t <= end``, as aware UTC datetimes.

    These are the exact occurrence keys a scheduler emits (``Job.occurrence_at``): the cron
    expression read in the schedule's timezone, with the DST rule of
    :mod:`django_leasejobs.core.cron`.
    """
    return _cron(schedule).between(_aware(start, "start"), _aware(end, "end"))


def next_occurrences(
    schedule: Schedule, count: int = 10, after: dt.datetime | None = None
) -> list[dt.datetime]:
    """The next ``count`` occurrences after ``after`` (default: the database's now)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative integer, not {count!r}.")
    start = dbtime.db_now() if after is None else _aware(after, "after")
    return list(islice(_cron(schedule).after(start), count))


@functools.lru_cache(maxsize=4096)
def _first_after(expression: str, timezone: str, instant: dt.datetime) -> dt.datetime | None:
    """The first occurrence after the cursor: cached, so an idle tick does no cron math."""
    return next(cron.compile_cron(expression, timezone).after(instant), None)


def _newest(
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
    newest = None
    for instant in takewhile(lambda t: t <= ceiling, schedule_cron.after(floor)):
        newest = instant
    return newest


def _count(schedule_cron: cron.Cron, after: dt.datetime, through: dt.datetime) -> int | None:
    due = takewhile(lambda t: t <= through, schedule_cron.after(after))
    counted = sum(1 for _ in islice(due, COUNT_CAP + 1))
    return None if counted > COUNT_CAP else counted


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
        for job in Job.objects.filter(
            schedule=schedule, occurrence_at__gte=expected[0], occurrence_at__lte=expected[-1]
        )
    }
    skips = list(
        ScheduleSkip.objects.filter(
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


# --------------------------------------------------------------------------- the tick


@dataclass
class _Plan:
    """What one tick does with one schedule: skip a prefix of the due occurrences, emit the rest."""

    emit: list[dt.datetime] = field(default_factory=list)
    skip_through: dt.datetime | None = None
    skip_count: int | None = None
    skip_reason: str = ""


def _plan(
    schedule: Schedule, schedule_cron: cron.Cron, now: dt.datetime, budget: int
) -> _Plan | None:
    """Decide from the cursor and the database's ``now``; None when nothing is due."""
    baseline = schedule.last_occurrence_at or schedule.created_at
    first = _first_after(schedule.cron, schedule.timezone, baseline)
    if first is None or first > now:
        return None
    plan = _Plan()
    if schedule.misfire == Misfire.SKIP:
        grace = settings.MISFIRE_GRACE_SECONDS
        horizon = now - dt.timedelta(seconds=grace)
        plan.skip_reason = f"misfire=skip: missed by more than {grace}s"
    else:
        horizon = now - dt.timedelta(seconds=schedule.catchup_window)
        plan.skip_reason = (
            f"misfire={schedule.misfire}: older than the catch-up window "
            f"({schedule.catchup_window}s)"
        )
    if schedule.misfire == Misfire.LATEST:
        newest = _newest(schedule_cron, baseline, now)
        assert newest is not None  # ``first`` is due
        if newest > horizon:
            plan.emit = [newest]
            if first < newest:
                plan.skip_through = _newest(schedule_cron, baseline, newest - _MICROSECOND)
                plan.skip_reason = "misfire=latest: only the newest due occurrence runs"
        else:
            plan.skip_through = newest
    else:
        lower = max(baseline, horizon)
        due = takewhile(lambda t: t <= now, schedule_cron.after(lower))
        plan.emit = list(islice(due, budget))
        if first <= lower:
            plan.skip_through = _newest(schedule_cron, baseline, lower)
    if plan.skip_through is not None:
        plan.skip_count = _count(schedule_cron, baseline, plan.skip_through)
    return plan


def _run_at(schedule: Schedule, occurrence_at: dt.datetime) -> dt.datetime:
    """The occurrence plus a random offset in [0, jitter]: spreads "on the hour" spikes."""
    if schedule.jitter <= 0:
        return occurrence_at
    return occurrence_at + dt.timedelta(seconds=random.uniform(0, schedule.jitter))


def _tick_schedule(schedule: Schedule, now: dt.datetime, budget: int) -> int:
    schedule_cron = _cron(schedule)
    if schedule.misfire not in Misfire.values:
        raise ScheduleError(
            f"Schedule {schedule.name!r}: unknown misfire policy {schedule.misfire!r}."
        )
    # An unknown job moves nothing: fix the code, and it resumes. Found as a worker finds a
    # row's job: its module imported if the allow-list has it.
    registry.find(schedule.job)
    plan = _plan(schedule, schedule_cron, now, budget)
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
    due = list(Schedule.objects.filter(enabled=True).annotate(db_now=DbNow()).order_by("pk"))
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
            schedule_cron = _cron(schedule)
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
    due = list(Schedule.objects.filter(enabled=True).annotate(db_now=DbNow()))
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
