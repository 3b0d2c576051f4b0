"""Reading one ``LEASEJOBS_*`` setting: its default, and the checks every kind of value shares.

:class:`.conf.Settings` has one documented property per setting; the property says what the
value means and these functions read it: a number in a range, a flag, a duration (``"24h"``,
read by :mod:`.durations`), with the message of ``ImproperlyConfigured`` naming the setting.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from .durations import parse_ages, parse_duration
from .value_rules import MAX_ATTEMPTS_LIMIT

PREFIX = "LEASEJOBS_"

DEFAULTS: dict[str, Any] = {
    "DEFAULT_QUEUE": "default",
    "MAX_ATTEMPTS": 5,
    "MAX_SNOOZES": 100,
    "BACKOFF_BASE": 2.0,
    "BACKOFF_CAP": 3600.0,
    "BACKOFF_JITTER": "equal",
    "LEASE_SECONDS": 60.0,
    "HEARTBEAT_SECONDS": 15.0,
    "POLL_SECONDS": 1.0,
    "MAX_PAYLOAD_BYTES": 256 * 1024,
    "SCHEDULES": {},
    "MISFIRE_GRACE_SECONDS": 60,
    "NOTIFY": True,
    "QUEUES": None,
    "HEALTH_MAX_DUE_AGE": None,
    "HEALTH_MAX_DEAD_PER_HOUR": None,
    "HEALTH_MAX_EXPIRED_LEASES": None,
    "HEALTH_MAX_PAUSED_AGE": None,
    "HEALTH_MAX_STUCK": None,
    "HEALTH_MAX_UNKNOWN": None,
    "HEALTH_MAX_UNSERVED_AGE": 60.0,
    "STATS_MAX_QUEUES": 200,
    "METRICS": False,
    "EAGER": False,
    "MONITORING_TOKEN": None,
    "TASK_MODULES": (),
    "TIMEOUT_SECONDS": None,
    "API_JOBS": (),
    "API_MAX_BODY_BYTES": 1024 * 1024,
    "API_PAGE_SIZE": 50,
    "API_MAX_PAGE_SIZE": 500,
    "API_MAX_BATCH": 100,
    "API_MAX_ATTEMPTS": 100,
    "RETENTION": {},
    "UNKNOWN_JOB_GRACE": "24h",
    "HISTORY_PARTITION": None,
    "OTEL_SPAN_RELATIONSHIP": "link",
    "JOB_LOGS": {"level": "INFO"},
    "DATABASE": None,
    "READ_DATABASES": {},
    "QUEUE_DATABASES": {},
    "READ_MAX_LAG": 30.0,
}

RETENTION_STATES = ("succeeded", "cancelled", "dead")
"""The finished states ``LEASEJOBS_RETENTION`` may give an age (``upkeep.PRUNABLE``)."""


def raw(name: str) -> Any:
    """The setting as the project gives it, or its default."""
    return getattr(django_settings, PREFIX + name, DEFAULTS[name])


def number(name: str, *, minimum: float, integer: bool = False) -> Any:
    """A number (an ``int`` with ``integer``; never a bool) of at least ``minimum``."""
    value = raw(name)
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        wanted = "an integer" if integer else "a number"
        raise ImproperlyConfigured(f"{PREFIX}{name} must be {wanted}, not {value!r}.")
    if value < minimum:
        raise ImproperlyConfigured(f"{PREFIX}{name} must be at least {minimum}, not {value!r}.")
    return value


def column_integer(name: str, *, minimum: int) -> int:
    """An integer stored in a 32-bit column (an attempt or snooze budget): at most
    ``MAX_ATTEMPTS_LIMIT``."""
    value = int(number(name, minimum=minimum, integer=True))
    if value > MAX_ATTEMPTS_LIMIT:
        raise ImproperlyConfigured(
            f"{PREFIX}{name} must be at most {MAX_ATTEMPTS_LIMIT}, not {value!r}."
        )
    return value


def optional_number(name: str, *, integer: bool = False) -> float | None:
    """A health threshold: None (not checked) or a number >= 0."""
    if raw(name) is None:
        return None
    return float(number(name, minimum=0, integer=integer))


def optional_count(name: str) -> int | None:
    """A health threshold that counts: None (not checked) or an integer >= 0."""
    value = optional_number(name, integer=True)
    return None if value is None else int(value)


def flag(name: str) -> bool:
    """``True`` or ``False``, nothing that merely looks like one."""
    value = raw(name)
    if not isinstance(value, bool):
        raise ImproperlyConfigured(f"{PREFIX}{name} must be True or False, not {value!r}.")
    return value


def duration(name: str) -> dt.timedelta:
    """A duration with a unit (``"24h"``, ``"90s"``, a ``timedelta``)."""
    try:
        return parse_duration(raw(name))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{PREFIX}{name}: {exc}") from None


def ages(name: str, states: tuple[str, ...]) -> dict[str, dt.timedelta]:
    """A duration per state, for the states in ``states`` (``{"dead": "30d"}``)."""
    try:
        return parse_ages(raw(name), states)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{PREFIX}{name}{exc}") from None


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The levels ``LEASEJOBS_JOB_LOGS["level"]`` may name."""


def job_logs_level(value: Any) -> int | None:
    """``LEASEJOBS_JOB_LOGS``: ``None``, or a dict with only ``"level"``, a level's name (or
    its number, as ``logging`` takes it); the level's number."""
    name = f"{PREFIX}JOB_LOGS"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f'{name} must be a dict such as {{"level": "INFO"}}, or None, not {value!r}.'
        )
    unknown = sorted(str(key) for key in value if key != "level")
    if unknown:
        raise ImproperlyConfigured(f"{name} has unknown keys {', '.join(unknown)}; it takes level.")
    level = value.get("level", "INFO")
    if isinstance(level, str) and level.upper() in LOG_LEVELS:
        return int(logging.getLevelName(level.upper()))
    if isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= 50:
        return level
    raise ImproperlyConfigured(
        f'{name}["level"] must be one of {", ".join(LOG_LEVELS)} (or 0 to 50), not {level!r}.'
    )


def _known_aliases() -> list[str]:
    return list(getattr(django_settings, "DATABASES", {}))


def database_alias(value: Any) -> str | None:
    """``LEASEJOBS_DATABASE``: ``None``, or the alias of a database in ``DATABASES``.

    Checked against ``DATABASES`` when read, so a typo stops the first command with the list
    of aliases there are, instead of Django's ``ConnectionDoesNotExist`` at the first enqueue.
    """
    name = f"{PREFIX}DATABASE"
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ImproperlyConfigured(
            f"{name} must be None or the alias of a database in DATABASES (a string), "
            f"not {value!r}."
        )
    known = _known_aliases()
    if value not in known:
        raise ImproperlyConfigured(
            f"{name} is {value!r}, which is not a database in DATABASES "
            f"(there are: {', '.join(map(repr, known)) or 'none'})."
        )
    return value


def read_databases(value: Any) -> dict[str, str]:
    """``LEASEJOBS_READ_DATABASES``: a dict of queue database alias -> replica alias, both in
    ``DATABASES``.

    Checked when read, as ``database_alias`` is: a typo in a replica's alias would otherwise
    surface as ``ConnectionDoesNotExist`` on the dashboard only. Whether each key is a queue
    database is the system check ``leasejobs.E018`` (it needs the routers, a layer above).
    """
    name = f"{PREFIX}READ_DATABASES"
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f'{name} must be a dict of queue database -> replica alias, such as {{"jobs": '
            f'"jobs_replica"}}, not {value!r}.'
        )
    known = _known_aliases()
    for primary, replica in value.items():
        for alias in (primary, replica):
            if not isinstance(alias, str) or not alias:
                raise ImproperlyConfigured(
                    f"{name} must map database aliases (strings) to database aliases, not "
                    f"{primary!r}: {replica!r}."
                )
            if alias not in known:
                raise ImproperlyConfigured(
                    f"{name} names {alias!r} ({primary!r}: {replica!r}), which is not a "
                    f"database in DATABASES (there are: {', '.join(map(repr, known)) or 'none'})."
                )
    return dict(value)


def queue_databases(value: Any) -> dict[str, str]:
    """``LEASEJOBS_QUEUE_DATABASES``: a dict of queue name or glob -> database alias in
    ``DATABASES``, such as ``{"reports": "jobs2", "eu-*": "jobs_eu"}``.

    Checked when read, as ``database_alias`` is: a typo in an alias would otherwise surface as
    ``ConnectionDoesNotExist`` at the first enqueue to that queue only.
    """
    name = f"{PREFIX}QUEUE_DATABASES"
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f"{name} must be a dict of queue name (or glob) -> database alias, such as "
            f'{{"reports": "jobs2", "eu-*": "jobs_eu"}}, not {value!r}.'
        )
    known = _known_aliases()
    for pattern, alias in value.items():
        if not isinstance(pattern, str) or not pattern.strip():
            raise ImproperlyConfigured(
                f"{name} keys are queue names or globs (non-empty strings), not {pattern!r}."
            )
        if not isinstance(alias, str) or alias not in known:
            raise ImproperlyConfigured(
                f"{name} sends {pattern!r} to {alias!r}, which is not a database in DATABASES "
                f"(there are: {', '.join(map(repr, known)) or 'none'})."
            )
    return dict(value)
