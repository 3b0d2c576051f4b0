"""System checks of schedules: the ``LEASEJOBS_SCHEDULES`` entries, and those declared in code.

``check_schedules_and_jobs`` checks the schedule entries (``leasejobs.E003`` to ``E005``,
described in :mod:`django_leasejobs.checks`) and, in the same check, the jobs and queues the
settings and the registry declare (:mod:`.jobs`' ``E006`` and ``E010``, :mod:`.queues`'
``E012`` and ``E013``); a setting it cannot read is left to ``E001``.

- ``leasejobs.W012``: a ``LEASEJOBS_SCHEDULES`` entry has the name of a schedule a job declares
  with ``@job(cron=...)``: the settings entry wins, the job's ``cron`` is ignored
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from ..core import cron, job_modules, registry
from ..core.conf import PREFIX, settings
from ..errors import JobArgumentsError, UnknownJobError
from . import jobs as job_checks
from . import queues as queue_checks

Messages = list[checks.CheckMessage]


def register() -> None:
    checks.register(check_code_schedules, "leasejobs")


def check_schedules_and_jobs(app_configs: Any = None, **kwargs: Any) -> Messages:
    """E006, E010, the schedule entries' E003 to E005, then E012 and E013."""
    messages = job_checks.duplicate_jobs() + job_checks.api_jobs()
    try:
        schedules = settings.SCHEDULES
        queues = settings.QUEUES
    except ImproperlyConfigured:
        return messages  # reported as leasejobs.E001
    for name, spec in schedules.items():
        messages += _schedule(name, spec, queues)
    if queues is not None:
        messages += queue_checks.undeclared_queues(queues)
    return messages


def check_code_schedules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A settings entry named as a job's ``@job(cron=...)`` schedule replaces it: say so, since
    editing the decorator would then change nothing."""
    try:
        schedules = settings.SCHEDULES
    except ImproperlyConfigured:
        return []  # reported as leasejobs.E001
    return [
        checks.Warning(
            f"{PREFIX}SCHEDULES[{name!r}] has the name of the schedule the job declares with "
            f"@job(cron={spec.schedule.cron!r}): the settings entry wins and the job's cron, "
            "timezone, misfire and jitter are ignored.",
            hint="Remove one of the two declarations (or give the settings entry another name "
            "to run both).",
            id="leasejobs.W012",
        )
        for name, spec in sorted(registry.registered().items())
        if spec.schedule is not None and name in schedules
    ]


def _schedule(name: str, spec: Any, queues: Iterable[str] | None) -> Messages:
    where = f"{PREFIX}SCHEDULES[{name!r}]"
    if not isinstance(spec, dict):
        return [_malformed(f"{where} must be a dict, not {type(spec).__name__}.")]
    missing = [key for key in ("job", "cron") if not spec.get(key)]
    if missing:
        return [_malformed(f"{where} has no {' or '.join(repr(k) for k in missing)}.")]
    messages: Messages = []
    try:  # the rules the scheduler applies (five fields, no seconds, a date that exists)
        cron.check_expression(spec["cron"])
    except cron.CronError as exc:
        messages.append(
            _malformed(f"{where} has an invalid cron expression {spec['cron']!r}: {exc}.")
        )
    timezone = spec.get("timezone", "UTC")
    if not _is_timezone(timezone):
        messages.append(_malformed(f"{where} has an unknown timezone {timezone!r}."))
    problem = _unknown_job(spec["job"])
    if problem is not None:
        messages.append(
            checks.Error(
                f"{where} names the job {spec['job']!r}, which is not registered{problem}: "
                "the scheduler would emit nothing.",
                hint=f"Use the dotted path of a function decorated with @job. "
                f"{job_modules.JOB_ADVICE}",
                id="leasejobs.E004",
            )
        )
    else:
        messages += _unfit_arguments(where, spec)
    queue = spec.get("queue")
    if queues is not None and queue and queue not in queues:
        messages.append(
            checks.Error(
                f"{where} sends its jobs to queue {queue!r}, which is not in {PREFIX}QUEUES.",
                hint=f"Add {queue!r} to {PREFIX}QUEUES or fix the schedule's queue.",
                id="leasejobs.E005",
            )
        )
    return messages


def _unfit_arguments(where: str, spec: dict[str, Any]) -> Messages:
    """E003 when the schedule's arguments do not fit its job's handler (JSON is the sync's)."""
    args, kwargs = spec.get("args", []), spec.get("kwargs", {})
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
        return []
    try:
        registry.find(spec["job"]).check_arguments(args, kwargs)
    except JobArgumentsError as exc:
        return [_malformed(f"{where}: {exc}")]
    return []


def _unknown_job(name: Any) -> str | None:
    """``None`` when a worker's scheduler finds the job (importing its module as a worker
    would, ``registry.find``); else why not, as `` (...)`` or an empty string."""
    if not isinstance(name, str):
        return ""
    try:
        registry.find(name)
    except UnknownJobError as exc:
        return f" ({exc.problem})" if exc.problem else ""
    return None


def _malformed(message: str) -> checks.Error:
    return checks.Error(
        message,
        hint='Each schedule is {"job": "app.jobs.fn", "cron": "0 3 * * *", ...}.',
        id="leasejobs.E003",
    )


def _is_timezone(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
