"""Enqueue: validate everything (:mod:`.new_rows`), then one INSERT in the caller's transaction.

A dedupe key is settled by the unique constraint on ``(name, live_dedupe_key)``: racing
producers of one job name both try to insert, one wins, the other gets IntegrityError inside a
savepoint (so the caller's transaction survives) and returns the winner's row.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from django.db import IntegrityError, transaction

from .. import dialects
from ..core import otel_metrics, registry, tracing
from ..core.conf import settings
from ..db import signals
from ..db.dbtime import db_now
from ..errors import JobArgumentsError, JobValidationError
from ..models import Job
from ..models.databases import using_database
from . import dedupe, routes
from .base import job_database, logger, send_enqueued_signal
from .new_rows import (
    ENQUEUE_OPTIONS,
    NO_FAIRNESS,
    Defaults,
    call_values,
    check_options,
    checked_arguments,
    row_values,
)


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
    key = values["dedupe_key"]
    if key is None:
        job = dialect.insert(using, values)
        logger.info("job.enqueued id=%s name=%s queue=%s", job.pk, job.name, job.queue)
        send_enqueued_signal(job, using)
        return Inserted(job, True)
    values = dict(values)
    rule = values.pop(dedupe.RULE, None)
    dialect.check_sendable(using, values.items())
    for _ in range(5):
        holder = dedupe.holder(values["name"], key, rule, using)
        if holder is not None:
            return Inserted(dedupe.met(holder, values, rule, using), False)
        try:
            job, created = dedupe.insert_checked(
                lambda: dialect.insert(using, values), values["name"], key, rule, using
            )
        except IntegrityError:
            continue
        if not created:
            return Inserted(dedupe.met(job, values, rule, using), False)
        logger.info(
            "job.enqueued id=%s name=%s queue=%s dedupe_key=%s", job.pk, job.name, job.queue, key
        )
        send_enqueued_signal(job, using)
        return Inserted(job, True)
    raise JobValidationError(f"dedupe_key {key!r} kept changing hands; nothing was enqueued.")


def enqueue(
    name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, **options: Any
) -> Job:
    """Persist one job in the caller's transaction (one INSERT) and return it."""
    return enqueue_inserted(name, args, kwargs, **options).job


def enqueue_inserted(
    name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, **options: Any
) -> Inserted:
    """``enqueue``, saying whether the job is new or the live one holding its dedupe key.

    For a caller that must tell the two apart: the HTTP API answers 201 for a new job and
    200 for a dedupe hit.
    """
    check_options(options)
    with routes.routed(name, options.get("queue")) as using:
        values = row_values(name, args, kwargs or {}, **options)
        return traced_insert(values, using)


def traced_insert(values: dict[str, Any], using: str) -> Inserted:
    """``insert`` inside a ``send <queue>`` span, whose context the new row stores; a new
    job is counted (``messaging.client.sent.messages``)."""
    if tracing.enabled():
        with tracing.sending(values["queue"], values["name"]) as send:
            if send.carrier is not None:
                values["trace_context"] = send.carrier
            inserted = insert(values, using)
            send.sent(inserted.job.pk)
    else:
        inserted = insert(values, using)
    if inserted.created:
        otel_metrics.sent(values["queue"], values["name"])
    return inserted


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
    with routes.routed(path, options.get("queue"), task_backend) as using:
        values = row_values(path, args, kwargs, task_backend=task_backend, **options)
        return traced_insert(values, using).job


_ITEM_KEYS = frozenset({"args", "kwargs", *ENQUEUE_OPTIONS})
_NO_OPTIONS: dict[str, Any] = {}


def _item(item: Any) -> tuple[Sequence[Any], dict[str, Any], dict[str, Any]]:
    """An ``enqueue_many`` item as (args, kwargs, options)."""
    if isinstance(item, tuple | list) and len(item) == 2:
        return item[0], item[1], _NO_OPTIONS
    if isinstance(item, dict):
        extra = item.keys() - _ITEM_KEYS
        if extra:
            raise JobValidationError(f"Unknown keys in enqueue_many item: {sorted(extra)}.")
        options = {k: item[k] for k in ENQUEUE_OPTIONS if k in item}
        return item.get("args", ()), item.get("kwargs", {}), options
    raise JobValidationError(
        f"enqueue_many items are (args, kwargs) pairs or dicts, not {type(item).__name__}."
    )


def _bulk_row(
    name: str, item: Any, shared: dict[str, Any], defaults: Defaults, now: dt.datetime
) -> dict[str, Any]:
    """One ``enqueue_many`` item's row: ``shared`` plus its arguments when it has no options."""
    args, kwargs, options = _item(item)
    if options or defaults.keyed:
        row = row_values(name, args, kwargs, now=now, defaults=defaults, **options)
        if "trace_context" in shared:
            row["trace_context"] = shared["trace_context"]
        return row
    args_list, kwargs_dict = checked_arguments(defaults, args, kwargs)
    row = {**shared, "args": args_list, "kwargs": kwargs_dict}
    if defaults.limits:
        row.update(defaults.limits.values(args_list, kwargs_dict))
    if defaults.fairness:
        row.update(defaults.fairness.values(args_list, kwargs_dict))
    return row


def enqueue_many(name: str, items: Iterable[Any]) -> list[Job]:
    """Validate every item and insert them in bulk in one transaction; jobs in the order given.

    Items with a dedupe key go one by one (they may return an existing job); the rest are
    inserted in bulk. The items are validated as the dialect takes them, so on PostgreSQL
    the database inserts one chunk while the next is validated; an invalid item raises inside
    the transaction, which is rolled back whole: nothing is written either way.
    """
    items = list(items)
    if not items:
        return []
    if not settings.QUEUE_DATABASES:
        return _enqueue_many(name, items)
    # An item's own queue (a bad one, unhashable too, is refused by the enqueue, with its index).
    queues = [item.get("queue") if isinstance(item, dict) else None for item in items]
    using = routes.one_database(
        "enqueue_many",
        dict.fromkeys((name, q, "") for q in queues if q is None or isinstance(q, str)),
    )
    with using_database(using):
        return _enqueue_many(name, items)


def _enqueue_many(name: str, items: list[Any]) -> list[Job]:
    using = job_database()
    now = db_now(using)
    name = registry.canonical(name)  # a former name (an alias) is stored as the job's own
    defaults = Defaults.resolve(name)
    # What items without options share (all but their arguments), validated once.
    shared = call_values(name, defaults, now=now)
    shared["dedupe_key"] = shared["live_dedupe_key"] = None
    shared.update(NO_FAIRNESS.values((), {}))  # every row has the fair columns (an item's own)
    if defaults.version != 1:
        shared["version"] = defaults.version
    # In item order: None for a row of the bulk insert, the row itself for one with a dedupe
    # key (inserted alone). The bulk rows are the dialect's alone, so it may let them go.
    order: list[dict[str, Any] | None] = []
    due_queues: set[str] = set()

    def bulk_rows() -> Iterable[dict[str, Any]]:
        # Lazy, so a dialect may insert a chunk while the next one is validated.
        for index, item in enumerate(items):
            try:
                row = _bulk_row(name, item, shared, defaults, now)
            except JobArgumentsError as exc:
                raise JobArgumentsError(
                    f"enqueue_many item {index}: {exc}", field=exc.field
                ) from None
            if row["run_at"] <= now:
                due_queues.add(row["queue"])
            if row["dedupe_key"] is None:
                order.append(None)
                yield row
            else:
                order.append(row)

    dialect = dialects.for_alias(using)
    with (
        tracing.sending(shared["queue"], name, count=len(items)) as send,
        transaction.atomic(using=using),
    ):
        if send.carrier is not None:  # every job of the call stores the call's span
            shared["trace_context"] = send.carrier
        inserted = iter(dialect.insert_many(using, bulk_rows()))
        result = [next(inserted) if row is None else insert(row, using).job for row in order]
        dialect.announce(using, sorted(due_queues))
    if signals.wanted(signals.job_enqueued):
        for row, job in zip(order, result, strict=True):
            if row is None:  # insert() announced the others
                send_enqueued_signal(job, using)
    for queue, count in collections.Counter(job.queue for job in result).items():
        otel_metrics.sent(queue, name, count)
    logger.info("job.enqueued_many name=%s count=%s", name, len(result))
    return result
