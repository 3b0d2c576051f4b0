"""System checks: misconfiguration reported by ``manage.py check`` with stable ids.

- ``leasejobs.E001``: a ``LEASEJOBS_*`` setting has a bad value (wrong type, out of range; a
  ``LEASEJOBS_MONITORING_TOKEN`` too short or with characters a bearer token cannot carry,
  reported without its value)
- ``leasejobs.E002``: ``LEASEJOBS_HEARTBEAT_SECONDS`` is not shorter than
  ``LEASEJOBS_LEASE_SECONDS`` (leases expire between beats)
- ``leasejobs.W002``: the heartbeat is more than a third of the lease (one late beat loses it)
- ``leasejobs.E003``: a schedule in ``LEASEJOBS_SCHEDULES`` is malformed: not a dict, no ``job``
  or ``cron``, an invalid cron expression or timezone, arguments its job cannot take
- ``leasejobs.E004``: a schedule names a job that is not registered
- ``leasejobs.E005``: a schedule's queue is not in ``LEASEJOBS_QUEUES`` (when that list is set)
- ``leasejobs.E006``: two different functions are registered under one job name
- ``leasejobs.E007``: the database version is not supported: PostgreSQL < 13, SQLite < 3.35,
  MariaDB < 10.6, MySQL < 8 (database check)
- ``leasejobs.E008``: ``LEASEJOBS_METRICS`` is on but prometheus-client is not installed
- ``leasejobs.E009``: ``USE_TZ = False`` with a ``TIME_ZONE`` other than UTC: delays, leases and
  backoff would be off by the zone's offset
- ``leasejobs.E010``: ``LEASEJOBS_API_JOBS`` names a job that is not registered
- ``leasejobs.E011``: ``LEASEJOBS_API_PAGE_SIZE`` is larger than ``LEASEJOBS_API_MAX_PAGE_SIZE``
- ``leasejobs.E012``: a job's own queue (``@job(queue=...)``) is not in ``LEASEJOBS_QUEUES``
  (when that list is set): its enqueues would be refused
- ``leasejobs.E013``: ``LEASEJOBS_DEFAULT_QUEUE`` is not in ``LEASEJOBS_QUEUES`` (when that list
  is set): every job that names no queue would be refused
- ``leasejobs.W001``: SQLite not in WAL mode: the workers' writes and web requests block each
  other (database check)
- ``leasejobs.W003``: an unknown ``LEASEJOBS_*`` setting, probably a typo (with a suggestion)
- ``leasejobs.W004``: retired: a job's undeclared queue is now the error ``E012``
- ``leasejobs.W005``, ``W006``: the lease advisor's, in :mod:`django_leasejobs.checks.leases`
- ``leasejobs.W011``: a queue in use is named with a trailing ``:<digits>``, which
  ``runjobworker --queues`` reads as a thread budget (:mod:`django_leasejobs.checks.queues`)
- ``leasejobs.W007``: ``LEASEJOBS_EAGER`` with ``DEBUG = False``: a test setting that reached
  production, where each enqueue would run its job inside the request, with no worker, retry,
  lease or timeout
- ``leasejobs.W010``: the app's migrations are not all applied on the database (database check,
  in :mod:`django_leasejobs.db.migration_state`; a warning, so that ``migrate`` itself is not
  stopped): the app's commands refuse to start until ``migrate`` has run
- ``leasejobs.W099``, ``E099``: jobs a worker could not find
  (:mod:`django_leasejobs.checks.jobs`)

The database checks (E007, W001) carry Django's ``database`` tag: they run with
``manage.py check --database default`` and before ``migrate``, never on a plain ``check``.
"""

from __future__ import annotations

import difflib
import importlib.util
import sqlite3
import zoneinfo
from collections.abc import Iterable
from functools import cached_property
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from ..core import cron, job_modules, registry
from ..core.conf import PREFIX, Settings, settings
from ..errors import JobArgumentsError, UnknownJobError
from . import (
    jobs as job_checks,
)
from . import (
    leases as lease_checks,
)
from . import (
    queues as queue_checks,
)
from . import (
    schedules as schedule_checks,
)

MINIMUM_VERSIONS = {
    "postgresql": ((13,), "PostgreSQL 13"),
    "sqlite": ((3, 35), "SQLite 3.35"),
    "mariadb": ((10, 6), "MariaDB 10.6"),
    "mysql": ((8, 0), "MySQL 8.0"),
}

Messages = list[checks.CheckMessage]


def register() -> None:
    """Called from ``AppConfig.ready``; registering twice is harmless (Django keeps a set)."""
    checks.register(check_settings, "leasejobs")
    checks.register(check_schedules_and_jobs, "leasejobs")
    checks.register(check_databases, checks.Tags.database)
    lease_checks.register()
    queue_checks.register()
    job_checks.register()
    schedule_checks.register()


def setting_names() -> list[str]:
    """The names ``conf.Settings`` knows, without the prefix."""
    return sorted(
        name for name, value in vars(Settings).items() if isinstance(value, cached_property)
    )


# --------------------------------------------------------------------------- settings


def check_settings(app_configs: Any = None, **kwargs: Any) -> Messages:
    messages: Messages = []
    known = setting_names()
    values: dict[str, Any] = {}
    for name in known:
        try:
            values[name] = getattr(settings, name)
        except ImproperlyConfigured as exc:
            messages.append(
                checks.Error(
                    str(exc), hint="See docs/settings.md for each setting.", id="leasejobs.E001"
                )
            )
    for name in sorted(dir(django_settings)):
        if name.startswith(PREFIX) and name.removeprefix(PREFIX) not in known:
            close = difflib.get_close_matches(name.removeprefix(PREFIX), known, n=1)
            messages.append(
                checks.Warning(
                    f"{name} is not a django-leasejobs setting; it is ignored.",
                    hint=f"Did you mean {PREFIX}{close[0]}?" if close else None,
                    id="leasejobs.W003",
                )
            )
    messages += _heartbeat(values.get("LEASE_SECONDS"), values.get("HEARTBEAT_SECONDS"))
    page, most = values.get("API_PAGE_SIZE"), values.get("API_MAX_PAGE_SIZE")
    if page is not None and most is not None and page > most:
        messages.append(
            checks.Error(
                f"{PREFIX}API_PAGE_SIZE ({page}) is larger than {PREFIX}API_MAX_PAGE_SIZE "
                f"({most}): a list without a limit would ask for more than is allowed.",
                hint=f"Lower {PREFIX}API_PAGE_SIZE or raise {PREFIX}API_MAX_PAGE_SIZE.",
                id="leasejobs.E011",
            )
        )
    messages += _time_zone(django_settings.USE_TZ, django_settings.TIME_ZONE)
    if values.get("EAGER") and not django_settings.DEBUG:
        # A test setting: in production every enqueue would run its job inside the web
        # request that made it, with no worker, lease, retry or timeout.
        messages.append(
            checks.Warning(
                f"{PREFIX}EAGER is True with DEBUG = False: each enqueue runs its job in the "
                "process that made it (a web request waits for it), with no worker, retry, "
                "lease or timeout.",
                hint=f"{PREFIX}EAGER is for tests; leave it unset in production settings.",
                id="leasejobs.W007",
            )
        )
    if values.get("METRICS") and importlib.util.find_spec("prometheus_client") is None:
        messages.append(
            checks.Error(
                f"{PREFIX}METRICS is True but prometheus-client is not installed.",
                hint="pip install 'django-leasejobs[metrics]', or set it to False.",
                id="leasejobs.E008",
            )
        )
    return messages


def _time_zone(use_tz: bool, time_zone: str | None) -> Messages:
    """Database time is compared with stored times as UTC instants (SQLite's clock is UTC).

    With ``USE_TZ = False`` Django stores naive local times: outside UTC every delay, lease and
    backoff would be off by the zone's offset (a job delayed 10 minutes in Paris ran 50 minutes
    late or early), so that combination is refused rather than left to misbehave.
    """
    if use_tz or time_zone in (None, "UTC", "Etc/UTC"):
        return []
    return [
        checks.Error(
            f"USE_TZ = False with TIME_ZONE = {time_zone!r}: django-leasejobs compares the "
            "database clock with stored times as UTC, so run_at, leases and backoff would be "
            "off by the zone's offset.",
            hint="Set USE_TZ = True (Django's default), or TIME_ZONE = 'UTC'.",
            id="leasejobs.E009",
        )
    ]


def _heartbeat(lease: float | None, heartbeat: float | None) -> Messages:
    if lease is None or heartbeat is None:
        return []
    if heartbeat >= lease:
        return [
            checks.Error(
                f"{PREFIX}HEARTBEAT_SECONDS ({heartbeat:g}) is not shorter than "
                f"{PREFIX}LEASE_SECONDS ({lease:g}): every lease would expire before it is "
                "renewed, and running jobs would be taken again while they run.",
                hint=f"Renew at most every {lease / 3:g} s (a third of the lease).",
                id="leasejobs.E002",
            )
        ]
    if heartbeat > lease / 3:
        return [
            checks.Warning(
                f"{PREFIX}HEARTBEAT_SECONDS ({heartbeat:g}) is more than a third of "
                f"{PREFIX}LEASE_SECONDS ({lease:g}): one late or failed heartbeat loses the "
                "lease and the job runs twice.",
                hint=f"Renew at most every {lease / 3:g} s, or lengthen the lease.",
                id="leasejobs.W002",
            )
        ]
    return []


# --------------------------------------------------------------------------- schedules and jobs


def check_schedules_and_jobs(app_configs: Any = None, **kwargs: Any) -> Messages:
    messages: Messages = [
        checks.Error(
            f"Two different functions are registered as the job {name!r}; the last one "
            "imported wins, so which one runs depends on import order.",
            hint="Give one of them another name: @job(name=...).",
            id="leasejobs.E006",
        )
        for name in sorted(registry.duplicate_names())
    ]
    messages += _api_jobs()
    try:
        schedules = settings.SCHEDULES
        queues = settings.QUEUES
    except ImproperlyConfigured:
        return messages  # reported as leasejobs.E001
    for name, spec in schedules.items():
        messages += _schedule(name, spec, queues)
    if queues is not None:
        messages += _undeclared_queues(queues)
    return messages


def _undeclared_queues(queues: list[str]) -> Messages:
    """With ``LEASEJOBS_QUEUES`` set, every queue a job can be sent to must be declared.

    Errors, so that ``runjobworker``, ``runserver`` and ``migrate`` refuse to start: an enqueue
    to an undeclared queue raises ``JobValidationError``, which would otherwise surface only at
    the first enqueue, in production. A job with no queue of its own goes to the default queue
    and is covered by E013 alone (one message, not one per job).
    """
    messages: Messages = []
    try:
        default = settings.DEFAULT_QUEUE
    except ImproperlyConfigured:
        default = None  # reported as leasejobs.E001
    if default is not None and default not in queues:
        messages.append(
            checks.Error(
                f"{PREFIX}DEFAULT_QUEUE is {default!r}, which is not in {PREFIX}QUEUES: every "
                "job that names no queue would be refused at enqueue.",
                hint=f"Add {default!r} to {PREFIX}QUEUES or set {PREFIX}DEFAULT_QUEUE to one of "
                f"{', '.join(queues)}.",
                id="leasejobs.E013",
            )
        )
    for job_name, job_function in sorted(registry.registered().items()):
        queue = job_function.queue
        if queue is not None and queue not in queues:
            messages.append(
                checks.Error(
                    f"Job {job_name!r} goes to queue {queue!r}, which is not in "
                    f"{PREFIX}QUEUES: its enqueues would be refused.",
                    hint=f"Add {queue!r} to {PREFIX}QUEUES or change the job's queue.",
                    id="leasejobs.E012",
                )
            )
    return messages


def _api_jobs() -> Messages:
    """A name the API may enqueue must be registered: a typo would otherwise be a silent 404."""
    try:
        names = settings.API_JOBS
    except ImproperlyConfigured:
        return []  # reported as leasejobs.E001
    return [
        checks.Error(
            f"{PREFIX}API_JOBS lists {name!r}, which is not a registered job.",
            hint="Use the job's registered name (its dotted path, or @job(name=...)), and "
            "define it with @job in a module the web process imports at start (an installed "
            "app's jobs.py).",
            id="leasejobs.E010",
        )
        for name in sorted(names)
        if registry.lookup(name) is None
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


# --------------------------------------------------------------------------- databases


def check_databases(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> Messages:
    from ..models import Job

    messages: Messages = []
    for alias in databases or ():
        if router.allow_migrate_model(alias, Job):
            messages += connection_messages(connections[alias])
    return messages


def connection_messages(connection: BaseDatabaseWrapper) -> Messages:
    """The version and journal-mode checks of one database connection."""
    messages: Messages = []
    vendor, version = database_version(connection)
    problem = version_problem(vendor, version)
    if problem:
        messages.append(
            checks.Error(
                problem,
                hint="django-leasejobs supports PostgreSQL 13+, SQLite 3.35+ (RETURNING), "
                "MariaDB 10.6+ and MySQL 8 (SKIP LOCKED).",
                id="leasejobs.E007",
            )
        )
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            mode = str(cursor.fetchone()[0]).lower()
        if mode not in ("wal", "memory"):
            messages.append(
                checks.Warning(
                    f"SQLite database {connection.alias!r} is in journal mode {mode!r}, not WAL: "
                    "a worker's writes block every reader, and readers block the worker.",
                    hint='Add "init_command": "PRAGMA journal_mode=WAL;" to its OPTIONS (and '
                    '"transaction_mode": "IMMEDIATE"), or run PRAGMA journal_mode=WAL once.',
                    id="leasejobs.W001",
                )
            )
    return messages


def database_version(connection: BaseDatabaseWrapper) -> tuple[str, tuple[int, ...]]:
    """("postgresql" | "sqlite" | "mariadb" | "mysql" | other vendor, version tuple)."""
    vendor = connection.vendor
    if vendor == "sqlite":
        return vendor, tuple(sqlite3.sqlite_version_info)  # the library Django's backend uses
    if vendor == "postgresql":
        connection.ensure_connection()
        number = connection.pg_version  # type: ignore[attr-defined]
        return vendor, (number // 10000, number % 10000)
    if vendor == "mysql":
        version = tuple(connection.mysql_version)  # type: ignore[attr-defined]
        return ("mariadb" if connection.mysql_is_mariadb else "mysql"), version  # type: ignore[attr-defined]
    return vendor, ()


def version_problem(vendor: str, version: tuple[int, ...]) -> str | None:
    """Why this database version is unsupported, or None when it is supported."""
    if vendor not in MINIMUM_VERSIONS:
        return f"The {vendor} database backend is not supported by django-leasejobs."
    minimum, label = MINIMUM_VERSIONS[vendor]
    if version < minimum:
        shown = ".".join(str(part) for part in version)
        return f"{label} or later is required; this database is {vendor} {shown}."
    return None
