"""Schedules declared in code: ``@job(cron="0 3 * * *", timezone=..., misfire=..., jitter=...)``.

Checked when the decorator runs, with the rules a ``LEASEJOBS_SCHEDULES`` entry meets at sync
(so a typo fails at import, in every process, not in the scheduler at 3 a.m.), and synced to a
``Schedule`` row named after the job by ``upkeep.schedule_sync``, as settings entries are.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ..errors import ScheduleError
from . import cron

MISFIRE_POLICIES = ("all", "latest", "skip")
"""``models.Misfire``'s values (a test keeps them equal): the core cannot import models."""

CATCHUP_WINDOW = 3600
"""Seconds: missed occurrences older than this are skipped (the ``Schedule`` default)."""


@dataclass(frozen=True)
class CodeSchedule:
    """The schedule a job declares; its occurrences call the job with no arguments."""

    cron: str
    timezone: str = "UTC"
    misfire: str = "latest"
    jitter: int = 0

    def fields(self, job_name: str) -> dict[str, Any]:
        """The ``Schedule`` field values it sets, as a sync writes them (the row's name and
        job are the job's name; queue, priority and attempts are the job's own)."""
        return {
            "job": job_name,
            "cron": self.cron,
            "timezone": self.timezone,
            "args": [],
            "kwargs": {},
            "queue": "",
            "priority": None,
            "max_attempts": None,
            "jitter": self.jitter,
            "misfire": self.misfire,
            "enabled": True,
            "catchup_window": CATCHUP_WINDOW,
        }


def from_options(
    job_name: str,
    signature: inspect.Signature,
    *,
    cron_expression: Any = None,
    timezone: Any = None,
    misfire: Any = None,
    jitter: Any = None,
) -> CodeSchedule | None:
    """The job's schedule, or None without ``cron``; ``ScheduleError`` naming every problem."""
    where = f"@job(cron=...) of {job_name!r}"
    if cron_expression is None:
        given = [
            name
            for name, value in (("timezone", timezone), ("misfire", misfire), ("jitter", jitter))
            if value is not None
        ]
        if given:
            raise ScheduleError(
                f"@job of {job_name!r}: {', '.join(given)} only apply to a schedule; give "
                'cron= too (for example cron="0 3 * * *").'
            )
        return None
    problems = []
    try:
        expression = cron.check_expression(cron_expression)
    except cron.CronError as exc:
        problems.append(f"invalid cron expression {cron_expression!r}: {exc}")
        expression = ""
    zone = "UTC" if timezone is None else timezone
    try:
        cron.check_timezone(zone)
    except cron.CronError as exc:
        problems.append(str(exc))
    policy = "latest" if misfire is None else misfire
    if policy not in MISFIRE_POLICIES:
        problems.append(f"misfire must be one of {', '.join(MISFIRE_POLICIES)}, not {misfire!r}")
    spread = 0 if jitter is None else jitter
    if isinstance(spread, bool) or not isinstance(spread, int) or spread < 0:
        problems.append(f"jitter must be a whole number of seconds, 0 or more, not {jitter!r}")
    required = [
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if required:
        problems.append(
            "each occurrence calls the job with no arguments, but it requires "
            f"{', '.join(required)} (give them defaults, or declare the schedule in "
            "LEASEJOBS_SCHEDULES with args/kwargs)"
        )
    if len(job_name) > 200:
        problems.append("the job's name is its schedule's name, at most 200 characters")
    if problems:
        raise ScheduleError(f"{where}: {'; '.join(problems)}.")
    return CodeSchedule(cron=expression, timezone=zone, misfire=policy, jitter=spread)
