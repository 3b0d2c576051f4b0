"""Every ``LEASEJOBS_*`` setting, read in one place with a typed default.

Each setting is read and checked on first use, then kept until Django announces a change of a
``LEASEJOBS_*`` setting (``setting_changed``, which ``override_settings`` and pytest-django's
``settings`` fixture send), as Django does with its own settings: an enqueue reads three of them,
and an unset one would otherwise be looked up and defaulted afresh on every call. A bad
value raises ``ImproperlyConfigured`` naming the setting on every read (nothing bad is kept),
rather than failing later inside the worker.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from functools import cached_property
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from .durations import parse_ages, parse_duration

PREFIX = "LEASEJOBS_"
MAX_ATTEMPTS_LIMIT = 2**31 - 1
"""The ``max_attempts`` column is a 32-bit integer on every database."""

JITTER_MODES = ("full", "equal", "none")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

QUEUE_NAME = re.compile(r"(?!.*:[0-9]+\Z)[A-Za-z0-9_.:-]{1,100}")
"""A queue name, matched whole (``fullmatch``: ``$`` would let a final newline through).

A trailing ``:<digits>`` is refused: ``runjobworker --queues mail:10`` reads it as a thread
budget (:data:`BUDGET_LIKE` finds such names made before that rule)."""
QUEUE_NAME_RULE = "1-100 of letters, digits, _ . : -, not ending in ':' and digits"
BUDGET_LIKE = re.compile(r".*:[0-9]+")
"""A name that ``--queues`` would read as a queue and its threads (``fullmatch``)."""

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750's ``b64token``: what an ``Authorization: Bearer`` header can carry unquoted."""
TOKEN_MIN_LENGTH = 32
"""``secrets.token_urlsafe(32)`` gives 43 characters; a short token can be guessed."""

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
}

RETENTION_STATES = ("succeeded", "cancelled", "dead")
"""The finished states ``LEASEJOBS_RETENTION`` may give an age (``upkeep.PRUNABLE``)."""


def is_timeout(value: Any) -> bool:
    """A handler timeout: ``None`` (none) or a positive, finite number of seconds."""
    if value is None:
        return True
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value > 0
    )


def _get(name: str) -> Any:
    return getattr(django_settings, PREFIX + name, DEFAULTS[name])


def _number(name: str, *, minimum: float, integer: bool = False) -> Any:
    value = _get(name)
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        wanted = "an integer" if integer else "a number"
        raise ImproperlyConfigured(f"{PREFIX}{name} must be {wanted}, not {value!r}.")
    if value < minimum:
        raise ImproperlyConfigured(f"{PREFIX}{name} must be at least {minimum}, not {value!r}.")
    return value


def _optional_number(name: str, *, integer: bool = False) -> float | None:
    """A health threshold: None (not checked) or a number >= 0."""
    if _get(name) is None:
        return None
    return float(_number(name, minimum=0, integer=integer))


class Settings:
    """Typed accessors for the app's settings; import the ``settings`` instance below."""

    @cached_property
    def DEFAULT_QUEUE(self) -> str:
        """The queue of jobs that name none (a queue name: 1-100 of letters, digits,
        ``_ . : -``)."""
        value = _get("DEFAULT_QUEUE")
        if not isinstance(value, str) or not QUEUE_NAME.fullmatch(value):
            raise ImproperlyConfigured(
                f"{PREFIX}DEFAULT_QUEUE must be a queue name ({QUEUE_NAME_RULE}), not {value!r}."
            )
        return value

    @cached_property
    def MAX_ATTEMPTS(self) -> int:
        """Attempts before a job is dead-lettered, for jobs that set none (1 to 2,147,483,647)."""
        value = int(_number("MAX_ATTEMPTS", minimum=1, integer=True))
        if value > MAX_ATTEMPTS_LIMIT:  # the column's limit, as validation.check_max_attempts
            raise ImproperlyConfigured(
                f"{PREFIX}MAX_ATTEMPTS must be at most {MAX_ATTEMPTS_LIMIT}, not {value!r}."
            )
        return value

    @cached_property
    def MAX_SNOOZES(self) -> int:
        """Snoozes a job may take (``raise Snooze(...)``, which spends no attempt) before it is
        dead-lettered with reason ``snoozed too often`` (0 to 2,147,483,647; 0: a snooze
        dead-letters at once; docs/retries.md)."""
        value = int(_number("MAX_SNOOZES", minimum=0, integer=True))
        if value > MAX_ATTEMPTS_LIMIT:  # the snoozes column is a 32-bit integer too
            raise ImproperlyConfigured(
                f"{PREFIX}MAX_SNOOZES must be at most {MAX_ATTEMPTS_LIMIT}, not {value!r}."
            )
        return value

    @cached_property
    def BACKOFF_BASE(self) -> float:
        """Seconds before the first retry; the delay doubles with each attempt."""
        return float(_number("BACKOFF_BASE", minimum=0))

    @cached_property
    def BACKOFF_CAP(self) -> float:
        """The longest delay between two retries, in seconds."""
        return float(_number("BACKOFF_CAP", minimum=0))

    @cached_property
    def BACKOFF_JITTER(self) -> str:
        """How retry delays are spread: ``"full"``, ``"equal"`` or ``"none"``."""
        value = _get("BACKOFF_JITTER")
        if value not in JITTER_MODES:
            raise ImproperlyConfigured(
                f"{PREFIX}BACKOFF_JITTER must be one of {', '.join(JITTER_MODES)}, not {value!r}."
            )
        return str(value)

    @cached_property
    def LEASE_SECONDS(self) -> float:
        """The lease a worker takes on a job: a job whose worker stops renewing it is taken
        again this long after the last renewal."""
        return float(_number("LEASE_SECONDS", minimum=1))

    @cached_property
    def HEARTBEAT_SECONDS(self) -> float:
        """How often a worker renews the leases of its running jobs: well inside the lease
        (``leasejobs.E002``, ``leasejobs.W002``)."""
        return float(_number("HEARTBEAT_SECONDS", minimum=0.1))

    @cached_property
    def POLL_SECONDS(self) -> float:
        """How often an idle worker looks for due jobs, and runs its maintenance (lease
        recovery, the scheduler)."""
        return float(_number("POLL_SECONDS", minimum=0.01))

    @cached_property
    def MAX_PAYLOAD_BYTES(self) -> int:
        """The largest JSON payload (args and kwargs together) an enqueue accepts."""
        return int(_number("MAX_PAYLOAD_BYTES", minimum=2, integer=True))

    @cached_property
    def NOTIFY(self) -> bool:
        """PostgreSQL only: enqueue sends NOTIFY and idle workers LISTEN, so due jobs start at
        once instead of at the next poll; a finish sends one too, so ``job.wait()`` returns
        at once. Elsewhere (or when off) workers and waits poll."""
        value = _get("NOTIFY")
        if not isinstance(value, bool):
            raise ImproperlyConfigured(f"{PREFIX}NOTIFY must be True or False, not {value!r}.")
        return value

    @cached_property
    def SCHEDULES(self) -> dict[str, dict[str, Any]]:
        """Cron schedules, by name: ``{"name": {"job": ..., "cron": ...}}`` (docs/recurrence.md)."""
        value = _get("SCHEDULES")
        if not isinstance(value, dict):
            raise ImproperlyConfigured(
                f"{PREFIX}SCHEDULES must be a dict of name -> schedule, not {type(value).__name__}."
            )
        return value

    @cached_property
    def MISFIRE_GRACE_SECONDS(self) -> int:
        """How late an occurrence may be emitted and still count as on time (not missed)."""
        return int(_number("MISFIRE_GRACE_SECONDS", minimum=1, integer=True))

    @cached_property
    def QUEUES(self) -> list[str] | None:
        """The queues this project uses, if it declares them: an enqueue to any other queue is
        refused (``JobValidationError``), the system checks hold jobs and schedules to it, and
        ``jobstats`` lists every one even when idle; ``None``: any queue name."""
        value = _get("QUEUES")
        if value is None:
            return None
        if (
            not isinstance(value, list | tuple)
            or not value
            or not all(isinstance(name, str) and name for name in value)
        ):
            raise ImproperlyConfigured(
                f"{PREFIX}QUEUES must be None or a non-empty list of queue names, not {value!r}."
            )
        bad = next((name for name in value if not QUEUE_NAME.fullmatch(name)), None)
        if bad is not None:
            raise ImproperlyConfigured(
                f"{PREFIX}QUEUES lists a name that is not a valid queue name: {bad!r} "
                f"({QUEUE_NAME_RULE}); no job could be enqueued to it."
            )
        return list(value)

    @cached_property
    def TASK_MODULES(self) -> tuple[str, ...]:
        """Packages or modules, beyond the installed apps', whose ``django.tasks`` tasks may run.

        A worker imports a task path read from a row only inside these and the installed apps'
        packages, so a row cannot make it import (and run the top level of) any other module.
        """
        value = _get("TASK_MODULES")
        if not isinstance(value, list | tuple) or not all(
            isinstance(name, str) and _DOTTED.fullmatch(name) for name in value
        ):
            raise ImproperlyConfigured(
                f"{PREFIX}TASK_MODULES must be a list of dotted module names, not {value!r}."
            )
        return tuple(value)

    @cached_property
    def TIMEOUT_SECONDS(self) -> float | None:
        """Seconds a handler may run before its attempt fails with a ``timeout`` error, for
        jobs and tasks that set none of their own; ``None``: no limit (docs/worker.md#timeouts)."""
        value = _get("TIMEOUT_SECONDS")
        if not is_timeout(value):
            raise ImproperlyConfigured(
                f"{PREFIX}TIMEOUT_SECONDS must be None or a positive number of seconds, "
                f"not {value!r}."
            )
        return None if value is None else float(value)

    @cached_property
    def HEALTH_MAX_DUE_AGE(self) -> float | None:
        """Seconds the oldest due job may wait before ``checkjobs`` and the health view report
        it and the dashboard highlights it; ``None``: not checked (the dashboard then uses 60 s)."""
        return _optional_number("HEALTH_MAX_DUE_AGE")

    @cached_property
    def HEALTH_MAX_DEAD_PER_HOUR(self) -> int | None:
        """Dead letters per queue in the last hour before they are reported and highlighted;
        ``None``: not checked (the dashboard highlights any)."""
        value = _optional_number("HEALTH_MAX_DEAD_PER_HOUR", integer=True)
        return None if value is None else int(value)

    @cached_property
    def HEALTH_MAX_EXPIRED_LEASES(self) -> int | None:
        """Running jobs with an expired lease, per queue, before they are reported and
        highlighted; ``None``: not checked (the dashboard highlights any)."""
        value = _optional_number("HEALTH_MAX_EXPIRED_LEASES", integer=True)
        return None if value is None else int(value)

    @cached_property
    def HEALTH_MAX_PAUSED_AGE(self) -> float | None:
        """Seconds a queue may stay paused before ``checkjobs`` and the health view report it."""
        return _optional_number("HEALTH_MAX_PAUSED_AGE")

    @cached_property
    def HEALTH_MAX_STUCK(self) -> int | None:
        """Stuck handlers, over every live worker, before ``checkjobs`` and the view report it."""
        value = _optional_number("HEALTH_MAX_STUCK", integer=True)
        return None if value is None else int(value)

    @cached_property
    def HEALTH_MAX_UNKNOWN(self) -> int | None:
        """Jobs waiting for a worker that knows their name (deferred by workers that could not
        run it, in all) before ``checkjobs`` and the view report it (docs/deploying-changes.md)."""
        value = _optional_number("HEALTH_MAX_UNKNOWN", integer=True)
        return None if value is None else int(value)

    @cached_property
    def HEALTH_MAX_UNSERVED_AGE(self) -> float | None:
        """Seconds a due job may wait in a queue no live worker serves before ``checkjobs`` and
        the health view report it. On by default, unlike the others: a queue nobody serves
        is a mistake, never a load to tune for; the 60 s cover a new worker's first heartbeat,
        which is when it appears in the table of live workers."""
        return _optional_number("HEALTH_MAX_UNSERVED_AGE")

    @cached_property
    def METRICS(self) -> bool:
        """Count state changes in Prometheus counters in this process (needs prometheus-client)."""
        value = _get("METRICS")
        if not isinstance(value, bool):
            raise ImproperlyConfigured(f"{PREFIX}METRICS must be True or False, not {value!r}.")
        return value

    @cached_property
    def EAGER(self) -> bool:
        """Tests only: an enqueue runs its job in-process when the surrounding transaction
        commits, so a test sees the effect without a worker (``docs/testing.md``)."""
        value = _get("EAGER")
        if not isinstance(value, bool):
            raise ImproperlyConfigured(f"{PREFIX}EAGER must be True or False, not {value!r}.")
        return value

    @cached_property
    def MONITORING_TOKEN(self) -> str | None:
        """The bearer token that shows the health view's numbers and the metrics to scrapers.

        The message of a bad value never quotes it: it is a secret, and checks end up in logs.
        """
        value = _get("MONITORING_TOKEN")
        if value is None:
            return None
        wanted = (
            f"{PREFIX}MONITORING_TOKEN must be None or a string of at least {TOKEN_MIN_LENGTH} "
            "characters from A-Z a-z 0-9 - . _ ~ + / (then = padding)"
        )
        if not isinstance(value, str):
            raise ImproperlyConfigured(f"{wanted}, not a value of type {type(value).__name__}.")
        if len(value) < TOKEN_MIN_LENGTH:
            raise ImproperlyConfigured(f"{wanted}, not {len(value)} characters.")
        if not TOKEN_PATTERN.fullmatch(value):
            raise ImproperlyConfigured(f"{wanted}; it holds other characters.")
        return value

    @cached_property
    def STATS_MAX_QUEUES(self) -> int:
        """The most queues whose depth the stats count (the dashboard, ``jobstats``, the
        health view's numbers); the health verdict judges every queue whatever it says."""
        return int(_number("STATS_MAX_QUEUES", minimum=1, integer=True))

    @cached_property
    def API_JOBS(self) -> frozenset[str]:
        """Job names the HTTP API may enqueue (besides ``@job(api=True)``); none by default. Every
        name must be registered (``leasejobs.E010``; docs/api.md#the-allow-list)."""
        value = _get("API_JOBS")
        if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
            raise ImproperlyConfigured(
                f"{PREFIX}API_JOBS must be a list of registered job names, not {value!r}."
            )
        if not all(isinstance(name, str) and name for name in value):
            raise ImproperlyConfigured(
                f"{PREFIX}API_JOBS must hold job names (non-empty strings), not {value!r}."
            )
        return frozenset(value)

    @cached_property
    def API_MAX_BODY_BYTES(self) -> int:
        """The largest request body the API reads; a larger one is refused with 413."""
        return int(_number("API_MAX_BODY_BYTES", minimum=1024, integer=True))

    @cached_property
    def API_PAGE_SIZE(self) -> int:
        """Rows per page of an API list when the caller gives no ``limit``."""
        return int(_number("API_PAGE_SIZE", minimum=1, integer=True))

    @cached_property
    def API_MAX_PAGE_SIZE(self) -> int:
        """The largest ``limit`` an API list accepts."""
        return int(_number("API_MAX_PAGE_SIZE", minimum=1, integer=True))

    @cached_property
    def API_MAX_BATCH(self) -> int:
        """The most jobs one enqueue-many request may carry."""
        return int(_number("API_MAX_BATCH", minimum=1, integer=True))

    @cached_property
    def API_MAX_ATTEMPTS(self) -> int:
        """The largest ``max_attempts`` an API caller may give a job: a failing job with a
        budget of millions of attempts is retried practically for ever. Python callers are
        trusted code and are not capped."""
        value = int(_number("API_MAX_ATTEMPTS", minimum=1, integer=True))
        if value > MAX_ATTEMPTS_LIMIT:  # the column's limit, as validation.check_max_attempts
            raise ImproperlyConfigured(
                f"{PREFIX}API_MAX_ATTEMPTS must be at most {MAX_ATTEMPTS_LIMIT}, not {value!r}."
            )
        return value

    @cached_property
    def RETENTION(self) -> dict[str, dt.timedelta]:
        """How long finished jobs are kept, by state: ``{"succeeded": "7d", "dead": "30d"}``;
        workers prune older ones (docs/operations.md#retention). A state not given is kept for
        ever, and so is everything by default."""
        try:
            return parse_ages(_get("RETENTION"), RETENTION_STATES)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{PREFIX}RETENTION{exc}") from None

    @cached_property
    def UNKNOWN_JOB_GRACE(self) -> dt.timedelta:
        """How long a job whose name no worker can run waits for one that can, from its first
        deferral, before it is dead-lettered as ``unregistered job`` (a duration such as
        ``"24h"``; ``"0s"``: dead-lettered at its first claim; docs/deploying-changes.md)."""
        try:
            return parse_duration(_get("UNKNOWN_JOB_GRACE"))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{PREFIX}UNKNOWN_JOB_GRACE: {exc}") from None

    def forget(self) -> None:
        """Drop every value read so far: the next read takes the current setting."""
        self.__dict__.clear()


settings = Settings()


def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith(PREFIX):
        settings.forget()


setting_changed.connect(_setting_changed, dispatch_uid="django_leasejobs.core.conf")
