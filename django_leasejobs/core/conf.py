"""Every ``LEASEJOBS_*`` setting, read in one place with a typed default.

Each setting is read and checked on first use, then kept until Django announces a change of a
``LEASEJOBS_*`` setting (``setting_changed``, which ``override_settings`` and pytest-django's
``settings`` fixture send), as Django does with its own settings: an enqueue reads three of them,
and an unset one would otherwise be looked up and defaulted afresh on every call. A bad
value raises ``ImproperlyConfigured`` naming the setting on every read (nothing bad is kept),
rather than failing later inside the worker.

Each property's docstring is the setting's documentation (the reference is built from them);
the default of each is in :mod:`.setting_values`, with the readers the properties share, and
the rules for names and budgets that enqueue input follows too in :mod:`.value_rules`.
"""

from __future__ import annotations

import datetime as dt
from functools import cached_property
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from .setting_values import (
    DEFAULTS,
    PREFIX,
    RETENTION_STATES,
    ages,
    column_integer,
    database_alias,
    duration,
    flag,
    job_logs_level,
    number,
    optional_count,
    optional_number,
    queue_databases,
    raw,
    read_databases,
)
from .value_rules import (
    DOTTED,
    JITTER_MODES,
    QUEUE_NAME,
    QUEUE_NAME_RULE,
    SPAN_RELATIONSHIPS,
    TOKEN_MIN_LENGTH,
    TOKEN_PATTERN,
    is_timeout,
)

__all__ = ["DEFAULTS", "PREFIX", "Settings", "settings"]


class Settings:
    """Typed accessors for the app's settings; import the ``settings`` instance below."""

    @cached_property
    def DEFAULT_QUEUE(self) -> str:
        """The queue of jobs that name none (a queue name: 1-100 of letters, digits,
        ``_ . : -``)."""
        value = raw("DEFAULT_QUEUE")
        if not isinstance(value, str) or not QUEUE_NAME.fullmatch(value):
            raise ImproperlyConfigured(
                f"{PREFIX}DEFAULT_QUEUE must be a queue name ({QUEUE_NAME_RULE}), not {value!r}."
            )
        return value

    @cached_property
    def MAX_ATTEMPTS(self) -> int:
        """Attempts before a job is dead-lettered, for jobs that set none (1 to 2,147,483,647)."""
        return column_integer("MAX_ATTEMPTS", minimum=1)

    @cached_property
    def MAX_SNOOZES(self) -> int:
        """Snoozes a job may take (``raise Snooze(...)``, which spends no attempt) before it is
        dead-lettered with reason ``snoozed too often`` (0 to 2,147,483,647; 0: a snooze
        dead-letters at once; docs/retries.md)."""
        return column_integer("MAX_SNOOZES", minimum=0)

    @cached_property
    def BACKOFF_BASE(self) -> float:
        """Seconds before the first retry; the delay doubles with each attempt."""
        return float(number("BACKOFF_BASE", minimum=0))

    @cached_property
    def BACKOFF_CAP(self) -> float:
        """The longest delay between two retries, in seconds."""
        return float(number("BACKOFF_CAP", minimum=0))

    @cached_property
    def BACKOFF_JITTER(self) -> str:
        """How retry delays are spread: ``"full"``, ``"equal"`` or ``"none"``."""
        value = raw("BACKOFF_JITTER")
        if value not in JITTER_MODES:
            raise ImproperlyConfigured(
                f"{PREFIX}BACKOFF_JITTER must be one of {', '.join(JITTER_MODES)}, not {value!r}."
            )
        return str(value)

    @cached_property
    def LEASE_SECONDS(self) -> float:
        """The lease a worker takes on a job: a job whose worker stops renewing it is taken
        again this long after the last renewal."""
        return float(number("LEASE_SECONDS", minimum=1))

    @cached_property
    def HEARTBEAT_SECONDS(self) -> float:
        """How often a worker renews the leases of its running jobs: well inside the lease
        (``leasejobs.E002``, ``leasejobs.W002``)."""
        return float(number("HEARTBEAT_SECONDS", minimum=0.1))

    @cached_property
    def POLL_SECONDS(self) -> float:
        """How often an idle worker looks for due jobs, and runs its maintenance (lease
        recovery, the scheduler)."""
        return float(number("POLL_SECONDS", minimum=0.01))

    @cached_property
    def MAX_PAYLOAD_BYTES(self) -> int:
        """The largest JSON payload (args and kwargs together) an enqueue accepts."""
        return int(number("MAX_PAYLOAD_BYTES", minimum=2, integer=True))

    @cached_property
    def NOTIFY(self) -> bool:
        """PostgreSQL only: enqueue sends NOTIFY and idle workers LISTEN, so due jobs start at
        once instead of at the next poll; a finish sends one too, so ``job.wait()`` returns
        at once. Elsewhere (or when off) workers and waits poll."""
        return flag("NOTIFY")

    @cached_property
    def SCHEDULES(self) -> dict[str, dict[str, Any]]:
        """Cron schedules, by name: ``{"name": {"job": ..., "cron": ...}}`` (docs/recurrence.md)."""
        value = raw("SCHEDULES")
        if not isinstance(value, dict):
            raise ImproperlyConfigured(
                f"{PREFIX}SCHEDULES must be a dict of name -> schedule, not {type(value).__name__}."
            )
        return value

    @cached_property
    def MISFIRE_GRACE_SECONDS(self) -> int:
        """How late an occurrence may be emitted and still count as on time (not missed)."""
        return int(number("MISFIRE_GRACE_SECONDS", minimum=1, integer=True))

    @cached_property
    def QUEUES(self) -> list[str] | None:
        """The queues this project uses, if it declares them: an enqueue to any other queue is
        refused (``JobValidationError``), the system checks hold jobs and schedules to it, and
        ``jobstats`` lists every one even when idle; ``None``: any queue name."""
        value = raw("QUEUES")
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
        value = raw("TASK_MODULES")
        if not isinstance(value, list | tuple) or not all(
            isinstance(name, str) and DOTTED.fullmatch(name) for name in value
        ):
            raise ImproperlyConfigured(
                f"{PREFIX}TASK_MODULES must be a list of dotted module names, not {value!r}."
            )
        return tuple(value)

    @cached_property
    def TIMEOUT_SECONDS(self) -> float | None:
        """Seconds a handler may run before its attempt fails with a ``timeout`` error, for
        jobs and tasks that set none of their own; ``None``: no limit (docs/worker.md#timeouts)."""
        value = raw("TIMEOUT_SECONDS")
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
        return optional_number("HEALTH_MAX_DUE_AGE")

    @cached_property
    def HEALTH_MAX_DEAD_PER_HOUR(self) -> int | None:
        """Dead letters per queue in the last hour before they are reported and highlighted;
        ``None``: not checked (the dashboard highlights any)."""
        return optional_count("HEALTH_MAX_DEAD_PER_HOUR")

    @cached_property
    def HEALTH_MAX_EXPIRED_LEASES(self) -> int | None:
        """Running jobs with an expired lease, per queue, before they are reported and
        highlighted; ``None``: not checked (the dashboard highlights any)."""
        return optional_count("HEALTH_MAX_EXPIRED_LEASES")

    @cached_property
    def HEALTH_MAX_PAUSED_AGE(self) -> float | None:
        """Seconds a queue may stay paused before ``checkjobs`` and the health view report it."""
        return optional_number("HEALTH_MAX_PAUSED_AGE")

    @cached_property
    def HEALTH_MAX_STUCK(self) -> int | None:
        """Stuck handlers, over every live worker, before ``checkjobs`` and the view report it."""
        return optional_count("HEALTH_MAX_STUCK")

    @cached_property
    def HEALTH_MAX_UNKNOWN(self) -> int | None:
        """Jobs waiting for a worker that knows their name (deferred by workers that could not
        run it, in all) before ``checkjobs`` and the view report it (docs/deploying-changes.md)."""
        return optional_count("HEALTH_MAX_UNKNOWN")

    @cached_property
    def HEALTH_MAX_UNSERVED_AGE(self) -> float | None:
        """Seconds a due job may wait in a queue no live worker serves before ``checkjobs`` and
        the health view report it. On by default, unlike the others: a queue nobody serves
        is a mistake, never a load to tune for; the 60 s cover a new worker's first heartbeat,
        which is when it appears in the table of live workers."""
        return optional_number("HEALTH_MAX_UNSERVED_AGE")

    @cached_property
    def METRICS(self) -> bool:
        """Count state changes in Prometheus counters in this process (needs prometheus-client)."""
        return flag("METRICS")

    @cached_property
    def EAGER(self) -> bool:
        """Tests only: an enqueue runs its job in-process when the surrounding transaction
        commits, so a test sees the effect without a worker (``docs/testing.md``)."""
        return flag("EAGER")

    @cached_property
    def MONITORING_TOKEN(self) -> str | None:
        """The bearer token that shows the health view's numbers and the metrics to scrapers.

        The message of a bad value never quotes it: it is a secret, and checks end up in logs.
        """
        value = raw("MONITORING_TOKEN")
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
        return int(number("STATS_MAX_QUEUES", minimum=1, integer=True))

    @cached_property
    def API_JOBS(self) -> frozenset[str]:
        """Job names the HTTP API may enqueue (besides ``@job(api=True)``); none by default. Every
        name must be registered (``leasejobs.E010``; docs/api.md#the-allow-list)."""
        value = raw("API_JOBS")
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
        return int(number("API_MAX_BODY_BYTES", minimum=1024, integer=True))

    @cached_property
    def API_PAGE_SIZE(self) -> int:
        """Rows per page of an API list when the caller gives no ``limit``."""
        return int(number("API_PAGE_SIZE", minimum=1, integer=True))

    @cached_property
    def API_MAX_PAGE_SIZE(self) -> int:
        """The largest ``limit`` an API list accepts."""
        return int(number("API_MAX_PAGE_SIZE", minimum=1, integer=True))

    @cached_property
    def API_MAX_BATCH(self) -> int:
        """The most jobs one enqueue-many request may carry."""
        return int(number("API_MAX_BATCH", minimum=1, integer=True))

    @cached_property
    def API_MAX_ATTEMPTS(self) -> int:
        """The largest ``max_attempts`` an API caller may give a job: a failing job with a
        budget of millions of attempts is retried practically for ever. Python callers are
        trusted code and are not capped."""
        return column_integer("API_MAX_ATTEMPTS", minimum=1)

    @cached_property
    def RETENTION(self) -> dict[str, dt.timedelta]:
        """How long finished jobs are kept, by state: ``{"succeeded": "7d", "dead": "30d"}``;
        workers prune older ones (docs/operations.md#retention). A state not given is kept for
        ever, and so is everything by default."""
        return ages("RETENTION", RETENTION_STATES)

    @cached_property
    def HISTORY_PARTITION(self) -> dt.timedelta | None:
        """PostgreSQL: the span of finish time each history partition holds (whole minutes, at
        least one); by default (``None``) a quarter of its state's retention age. A state with
        no age keeps its history in one partition (docs/operations.md#history-partitions)."""
        if raw("HISTORY_PARTITION") is None:
            return None
        span = duration("HISTORY_PARTITION")
        if span < dt.timedelta(minutes=1) or span % dt.timedelta(minutes=1):
            raise ImproperlyConfigured(
                f"LEASEJOBS_HISTORY_PARTITION must be whole minutes, at least one, not {span}."
            )
        return span

    @cached_property
    def UNKNOWN_JOB_GRACE(self) -> dt.timedelta:
        """How long a job whose name no worker can run waits for one that can, from its first
        deferral, before it is dead-lettered as ``unregistered job`` (a duration such as
        ``"24h"``; ``"0s"``: dead-lettered at its first claim; docs/deploying-changes.md)."""
        return duration("UNKNOWN_JOB_GRACE")

    @cached_property
    def OTEL_SPAN_RELATIONSHIP(self) -> str:
        """How a job's ``process`` span relates to the ``send`` span of its enqueue, when
        ``opentelemetry-api`` is installed: ``"link"`` (a new trace linked to it), ``"child"``
        (the same trace) or ``"none"`` (a new trace, unlinked); docs/observability.md."""
        value = raw("OTEL_SPAN_RELATIONSHIP")
        if value not in SPAN_RELATIONSHIPS:
            raise ImproperlyConfigured(
                f"{PREFIX}OTEL_SPAN_RELATIONSHIP must be one of "
                f"{', '.join(map(repr, SPAN_RELATIONSHIPS))}, not {value!r}."
            )
        return str(value)

    @cached_property
    def JOB_LOGS(self) -> int | None:
        """Each job's own logs (docs/observability.md#each-jobs-own-logs): ``{"level": "INFO"}``
        keeps the records a handler emits through ``logging`` at that level or above, per
        attempt, beside the job; ``None`` keeps none. Read as the level's number (or None)."""
        return job_logs_level(raw("JOB_LOGS"))

    @cached_property
    def DATABASE(self) -> str | None:
        """The alias of the database the app's tables live in, such as ``"jobs"``, with
        ``django_leasejobs.routers.JobsRouter`` in ``DATABASE_ROUTERS`` (``leasejobs.E015``);
        ``None``: wherever Django's routers send the app's models, else ``default``. An enqueue
        is atomic with the caller's writes only in that database
        (docs/databases.md#a-queue-database-of-its-own)."""
        return database_alias(raw("DATABASE"))

    @cached_property
    def READ_DATABASES(self) -> dict[str, str]:
        """Replicas for the read side: queue database alias -> replica alias, such as
        ``{"jobs": "jobs_replica"}``. The admin's lists and dashboard, the stats, the API's
        lists and the detailed health answers read the replica; claims, writes, result waits
        and admin actions never do (docs/databases.md#read-replicas)."""
        return read_databases(raw("READ_DATABASES"))

    @cached_property
    def QUEUE_DATABASES(self) -> dict[str, str]:
        """Shards: queue name or glob -> the alias of the database its jobs are written in,
        such as ``{"reports": "jobs2", "eu-*": "jobs_eu"}``; an exact name wins over a glob,
        then globs in the order given. Other queues stay in ``LEASEJOBS_DATABASE``
        (docs/databases.md#shards-queues-in-several-databases)."""
        return queue_databases(raw("QUEUE_DATABASES"))

    @cached_property
    def READ_MAX_LAG(self) -> float:
        """Seconds a replica may be behind before the admin warns that its figures are too old to
        trust (it keeps reading the replica: docs/databases.md#read-replicas)."""
        return float(number("READ_MAX_LAG", minimum=0))

    def forget(self) -> None:
        """Drop every value read so far: the next read takes the current setting."""
        self.__dict__.clear()


settings = Settings()


def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith(PREFIX):
        settings.forget()


setting_changed.connect(_setting_changed, dispatch_uid="django_leasejobs.core.conf")
