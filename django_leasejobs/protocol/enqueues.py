"""Enqueue: validate everything, then one INSERT in the caller's transaction.

A dedupe key is settled by the unique constraint on ``(name, live_dedupe_key)``: racing
producers of one job name both try to insert, one wins, the other gets IntegrityError inside a
savepoint (so the caller's transaction survives) and returns the winner's row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.core.signals import setting_changed
from django.db import IntegrityError, connections, transaction

from .. import client_encoding, dialects, limits, registry, validation
from ..conf import PREFIX as conf_settings_prefix
from ..conf import settings as conf_settings
from ..dbtime import db_now
from ..errors import JobValidationError
from ..models import Job
from . import dedupe
from .base import announce_enqueued, job_database, logger

NO_LIMITS = limits.Limits()

ENQUEUE_OPTIONS = (
    "run_at",
    "delay",
    "priority",
    "queue",
    "dedupe_key",
    "max_attempts",
    *dedupe.OPTIONS,
)


@dataclass(frozen=True)
class Defaults:
    """What a job gets when the caller does not say: resolved once per enqueue call."""

    queue: str
    priority: int
    max_attempts: int
    lease: float | None
    max_payload_bytes: int
    limits: limits.Limits = NO_LIMITS
    """The job's concurrency and rate limits: their keys are computed per enqueue."""

    @classmethod
    def resolve(cls, name: str, task_backend: str = "") -> Defaults:
        """The registered job's defaults (a ``django.tasks`` task's come from its caller)."""
        if task_backend:
            return cls(
                conf_settings.DEFAULT_QUEUE,
                0,
                conf_settings.MAX_ATTEMPTS,
                None,
                conf_settings.MAX_PAYLOAD_BYTES,
            )
        job_function = registry.get(name)
        return cls(
            job_function.get_queue(),
            job_function.priority,
            job_function.get_max_attempts(),
            job_function.lease,
            conf_settings.MAX_PAYLOAD_BYTES,
            job_function.limits,
        )


def check_options(options: dict[str, Any]) -> None:
    unknown = set(options) - set(ENQUEUE_OPTIONS)
    if unknown:
        raise JobValidationError(f"Unknown enqueue options: {', '.join(sorted(unknown))}.")


def row_values(
    name: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    run_at: dt.datetime | None = None,
    delay: Any = None,
    priority: int | None = None,
    queue: str | None = None,
    dedupe_key: str | bool | None = None,
    max_attempts: int | None = None,
    dedupe_states: Any = None,
    dedupe_period: Any = None,
    on_conflict: Any = None,
    now: dt.datetime | None = None,
    task_backend: str = "",
    defaults: Defaults | None = None,
) -> dict[str, Any]:
    """Validate everything and return a new row's field values; raise before anything is written.

    Fields not returned keep their model defaults (``run_at`` its database default, now).
    ``task_backend`` marks a ``django.tasks`` task enqueued through that ``TASKS`` alias: its
    name is a module path, not a registered job, and its defaults come from the caller.
    ``defaults`` lets a bulk enqueue resolve them once for all its rows.
    """
    defaults = defaults or Defaults.resolve(name, task_backend)
    args_list, kwargs_dict = validation.check_payload(
        args, kwargs, max_bytes=defaults.max_payload_bytes
    )
    due = _due(run_at, delay, now)
    values: dict[str, Any] = {
        "name": name,
        "args": args_list,
        "kwargs": kwargs_dict,
        "queue": _declared(validation.check_queue(queue if queue is not None else defaults.queue)),
        "priority": validation.check_priority(
            priority if priority is not None else defaults.priority
        ),
        "max_attempts": validation.check_max_attempts(
            max_attempts if max_attempts is not None else defaults.max_attempts
        ),
        "lease_seconds": defaults.lease,
        "task_backend": task_backend,
        **defaults.limits.values(args_list, kwargs_dict),
    }
    if due is not None:
        values["run_at"] = due
    key, rule = dedupe.resolve(
        name,
        args_list,
        kwargs_dict,
        lambda: values.get("run_at") or db_now(job_database()),
        dedupe_key=dedupe_key,
        dedupe_states=dedupe_states,
        dedupe_period=dedupe_period,
        on_conflict=on_conflict,
    )
    values["dedupe_key"] = values["live_dedupe_key"] = key
    if rule is not None:
        values[dedupe.RULE] = rule
    return values


def _declared(queue: str) -> str:
    """With ``LEASEJOBS_QUEUES`` set, a queue it does not list would wait for ever: refused."""
    validation.check_declared_queues([queue])
    return queue


def _due(run_at: dt.datetime | None, delay: Any, now: dt.datetime | None) -> dt.datetime | None:
    """The new row's ``run_at``; None leaves the database default (its own now)."""
    when, delay_seconds = validation.check_run_at(run_at, delay)
    if when is not None:
        return when
    if delay_seconds is not None:
        return (now or db_now(job_database())) + dt.timedelta(seconds=delay_seconds)
    return now


class Inserted(NamedTuple):
    job: Job
    created: bool
    """False: the live job already holding the dedupe key, returned instead."""


def insert(values: dict[str, Any], using: str) -> Inserted:
    """INSERT one validated row; with a dedupe key, the live job holding it may come back.

    The dialect refuses text its session cannot carry; a dedupe key is checked here too,
    before the lookup that sends it.
    """
    dialect = dialects.for_alias(using)
    values = dict(values)
    rule = values.pop(dedupe.RULE, None)
    key = values["dedupe_key"]
    if key is None:
        job = dialect.insert(values, using)
        logger.info("job.enqueued id=%s name=%s queue=%s", job.pk, job.name, job.queue)
        announce_enqueued(job, using)
        return Inserted(job, True)
    connection = connections[using]
    connection.ensure_connection()
    client_encoding.check_sendable(values.items(), connection)
    for _ in range(5):
        holder = dedupe.holder(values["name"], key, rule, using)
        if holder is not None:
            return Inserted(dedupe.met(holder, values, rule, using), False)
        try:
            job, created = dedupe.insert_checked(
                lambda: dialect.insert(values, using), values["name"], key, rule, using
            )
        except IntegrityError:
            continue
        if not created:
            return Inserted(dedupe.met(job, values, rule, using), False)
        logger.info(
            "job.enqueued id=%s name=%s queue=%s dedupe_key=%s", job.pk, job.name, job.queue, key
        )
        announce_enqueued(job, using)
        return Inserted(job, True)
    raise JobValidationError(f"dedupe_key {key!r} kept changing hands; nothing was enqueued.")


def enqueue(
    name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, **options: Any
) -> Job:
    """Persist one job in the caller's transaction (one INSERT) and return it."""
    if not options and not _keyed(name):  # the usual call: only the arguments are new
        plain = _plain_row(name)
        args_list, kwargs_dict = validation.check_payload(
            args, kwargs or {}, max_bytes=plain.max_bytes
        )
        values = {**plain.values, "args": args_list, "kwargs": kwargs_dict}
        if plain.limits:
            values.update(plain.limits.values(args_list, kwargs_dict))
    else:
        check_options(options)
        values = row_values(name, args, kwargs or {}, **options)
    return insert(values, job_database()).job


def enqueue_reporting(
    name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, **options: Any
) -> Inserted:
    """``enqueue``, saying whether the job is new or the live one holding its dedupe key.

    For a caller that must tell the two apart: the HTTP API answers 201 for a new job and
    200 for a dedupe hit.
    """
    check_options(options)
    values = row_values(name, args, kwargs or {}, **options)
    return insert(values, job_database())


def enqueue_task(
    path: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    task_backend: str,
    **options: Any,
) -> Job:
    """Persist one ``django.tasks`` task (by module path) in the caller's transaction.

    The row is marked with the ``TASKS`` alias it came through; only such rows are ever
    resolved by import path (and only to a ``Task`` instance) when a worker runs them.
    """
    check_options(options)
    if not task_backend:
        raise JobValidationError("enqueue_task needs the TASKS alias the task came through.")
    values = row_values(path, args, kwargs, task_backend=task_backend, **options)
    return insert(values, job_database()).job


class _PlainRow(NamedTuple):
    """A registered job's validated row for an enqueue without options (all but its
    arguments), and the payload cap."""

    values: dict[str, Any]
    max_bytes: int
    limits: limits.Limits


_plain_rows: dict[tuple[Any, ...], _PlainRow] = {}


def _plain_row(name: str) -> _PlainRow:
    """``name``'s ``_PlainRow``: worked out on its first enqueue, again after a change of
    a ``LEASEJOBS_*`` setting. Keyed by the registered function and its defaults as they are
    now, so a job registered again, or one whose ``queue`` a test patches, gets its own."""
    job_function = registry.get(name)
    key = (
        job_function,
        job_function.queue,
        job_function.priority,
        job_function.max_attempts,
        job_function.lease,
        job_function.limits,
    )
    found = _plain_rows.get(key)
    if found is None:
        defaults = Defaults.resolve(name)
        found = _PlainRow(
            row_values(name, (), {}, defaults=_without_limits(defaults)),
            defaults.max_payload_bytes,
            defaults.limits,
        )
        _plain_rows[key] = found
    return found


def _keyed(name: str) -> bool:
    """Does ``name``'s ``@job`` make a dedupe key of each call's arguments?"""
    spec = registry.lookup(name)
    return spec is not None and spec.dedupe_key is not None


def _forget_plain_rows(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith(conf_settings_prefix):
        _plain_rows.clear()


setting_changed.connect(_forget_plain_rows, dispatch_uid="django_leasejobs.protocol.enqueue")


def _item(item: Any) -> tuple[Sequence[Any], dict[str, Any], dict[str, Any]]:
    if isinstance(item, dict):
        extra = set(item) - {"args", "kwargs", *ENQUEUE_OPTIONS}
        if extra:
            raise JobValidationError(f"Unknown keys in enqueue_many item: {sorted(extra)}.")
        options = {k: item[k] for k in ENQUEUE_OPTIONS if k in item}
        return item.get("args", ()), item.get("kwargs", {}), options
    if isinstance(item, list | tuple) and len(item) == 2:
        return item[0], item[1], {}
    raise JobValidationError(
        f"enqueue_many items are (args, kwargs) pairs or dicts, not {type(item).__name__}."
    )


def enqueue_many(name: str, items: Iterable[Any]) -> list[Job]:
    """Validate every item and insert them in bulk in one transaction; jobs in the order given.

    Items with a dedupe key go one by one (they may return an existing job); the rest are
    inserted in bulk. On PostgreSQL the items are validated chunk by chunk while the database
    inserts the previous chunk; an invalid item raises inside the transaction, which is rolled
    back whole: nothing is written either way.
    """
    using = job_database()
    parsed = [_item(item) for item in items]
    if not parsed:
        return []
    now = db_now(using)
    defaults = Defaults.resolve(name)
    # Items without options (the usual bulk) share one validated row; only their arguments
    # differ and are checked one by one.
    plain_row = row_values(name, (), {}, now=now, defaults=_without_limits(defaults))
    keyed = _keyed(name)
    checked = (
        row_values(name, args, kwargs, now=now, defaults=defaults, **options)
        if options or keyed
        else _with_payload(plain_row, args, kwargs, defaults)
        for args, kwargs, options in parsed
    )
    rows: list[dict[str, Any]] = []

    def without_dedupe_key() -> Iterable[dict[str, Any]]:
        # Lazy, so a dialect may validate a chunk while the previous one is inserted.
        for row in checked:
            rows.append(row)
            if row["dedupe_key"] is None:
                yield row

    dialect = dialects.for_alias(using)
    with transaction.atomic(using=using):
        inserted = iter(dialect.insert_many(without_dedupe_key(), using))
        result = [
            next(inserted) if row["dedupe_key"] is None else insert(row, using).job for row in rows
        ]
        dialect.announce(using, sorted({r["queue"] for r in rows if r["run_at"] <= now}))
    for row, job in zip(rows, result, strict=True):
        if row["dedupe_key"] is None:  # insert() announced the others
            announce_enqueued(job, using)
    logger.info("job.enqueued_many name=%s count=%s", name, len(result))
    return result


def _with_payload(
    row: dict[str, Any], args: Sequence[Any], kwargs: dict[str, Any], defaults: Defaults
) -> dict[str, Any]:
    args_list, kwargs_dict = validation.check_payload(
        args, kwargs, max_bytes=defaults.max_payload_bytes
    )
    values = {**row, "args": args_list, "kwargs": kwargs_dict}
    if defaults.limits:
        values.update(defaults.limits.values(args_list, kwargs_dict))
    return values


def _without_limits(defaults: Defaults) -> Defaults:
    """``defaults`` for the shared row of a job's plain enqueues: its limit keys depend on
    each enqueue's arguments, so they are computed per row (``_with_payload``)."""
    return dataclasses.replace(defaults, limits=NO_LIMITS)
