"""System checks of schedules declared in code (``@job(cron=...)``).

- ``leasejobs.W012``: a ``LEASEJOBS_SCHEDULES`` entry has the name of a schedule a job declares
  with ``@job(cron=...)``: the settings entry wins, the job's ``cron`` is ignored
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from ..core import registry
from ..core.conf import PREFIX, settings


def register() -> None:
    checks.register(check_code_schedules, "leasejobs")


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
