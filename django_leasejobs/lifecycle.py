"""The lease protocol: every state change of a job, and its SQL, lives in this module.

Rules that hold for every function here:

* Each transition is one guarded statement. A worker's write carries its fencing token in the
  WHERE clause (``id = ? AND attempt = ? AND status = 'running'``); an operator's write carries the
  states it is allowed from. Nothing is read and then written unguarded.
* "Zero rows changed" is a result, not an exception: it comes back as ``Outcome.STALE`` (or
  ``False`` for operator actions) and is logged, so a stale worker can never overwrite a newer
  result and the worker loop never crashes on it.
* All times come from the database clock (``DbNow()``, ``STATEMENT_TIMESTAMP()``), never from the
  worker's clock, so workers with skewed clocks agree on what is due and what has expired.
* No function holds a transaction open longer than its own statements; handlers run outside.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import traceback as traceback_module
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, router, transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.expressions import DatabaseDefault, ExpressionWrapper, Value
from django.db.models.fields import DateTimeField

from . import (
    client_encoding,
    gc_pause,
    job_rows,
    notify,
    pg_insert,
    registry,
    signals,
    task_results,
    validation,
)
from .backoff import Backoff
from .conf import PREFIX as conf_settings_prefix
from .conf import settings as conf_settings
from .dbtime import DbNow
from .deadlocks import retry_deadlocks
from .errors import (
    InvalidTransitionError,
    JobValidationError,
    StaleAttemptError,
    TaskRefusedError,
)
from .models import CLAIMABLE, DeadLetter, Effect, Job, Schedule, ScheduleSkip, Status

logger = logging.getLogger("django_leasejobs")

ENQUEUE_OPTIONS = ("run_at", "delay", "priority", "queue", "dedupe_key", "max_attempts")
MAX_ERROR_CHARS = 20_000


class Outcome(enum.Enum):
    """What a guarded write did."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    DEAD = "dead"
    RELEASED = "released"
    STALE = "stale"
    """Zero rows changed: the token no longer owns the job (lease lost, job reclaimed)."""


@dataclass(frozen=True)
class Failure:
    """An attempt's error, as recorded in the job's history and its dead letter."""

    error: str
    traceback: str = ""
    kind: str = "error"

    @property
    def headline(self) -> str:
        """The error's first line, short enough for a log line."""
        return self.error.splitlines()[0][:200] if self.error else ""

    @classmethod
    def from_exception(cls, exc: BaseException) -> Failure:
        text = "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__))
        return cls(f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS], text[-MAX_ERROR_CHARS:])


def _alias(write: bool = True) -> str:
    return (router.db_for_write(Job) if write else router.db_for_read(Job)) or DEFAULT_DB_ALIAS


def _after(seconds: float) -> ExpressionWrapper:
    """The database's now plus ``seconds``, as an expression evaluated inside the statement."""
    return ExpressionWrapper(
        DbNow() + Value(dt.timedelta(seconds=seconds)), output_field=DateTimeField()
    )


def db_now() -> dt.datetime:
    """The database's clock, read in one cheap query (for delays computed before an INSERT)."""
    connection = connections[_alias()]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f000', 'NOW')", [])
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT STATEMENT_TIMESTAMP()", [])
        else:
            cursor.execute("SELECT CURRENT_TIMESTAMP(6)", [])
        raw = cursor.fetchone()[0]
    return _as_aware(raw)


def _as_aware(raw: Any) -> dt.datetime:
    if isinstance(raw, str):
        raw = dt.datetime.fromisoformat(raw)
    if raw.tzinfo is None:
        raw = raw.replace(tzinfo=dt.timezone.utc)
    return raw


# --------------------------------------------------------------------------- enqueue


@dataclass(frozen=True)
class _Defaults:
    """What a job gets when the caller does not say: resolved once per enqueue call."""

    queue: str
    priority: int
    max_attempts: int
    lease: float | None
    max_payload_bytes: int

    @classmethod
    def resolve(cls, name: str, task_backend: str = "") -> _Defaults:
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
        )


def _values(
    name: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    run_at: dt.datetime | None = None,
    delay: Any = None,
    priority: int | None = None,
    queue: str | None = None,
    dedupe_key: str | None = None,
    max_attempts: int | None = None,
    now: dt.datetime | None = None,
    task_backend: str = "",
    defaults: _Defaults | None = None,
) -> dict[str, Any]:
    """Validate everything and return a new row's field values; raise before anything is written.

    Fields not returned keep their model defaults (``run_at`` its database default, now).
    ``task_backend`` marks a ``django.tasks`` task enqueued through that ``TASKS`` alias: its
    name is a module path, not a registered job, and its defaults come from the caller.
    ``defaults`` lets a bulk enqueue resolve them once for all its rows.
    """
    defaults = defaults or _Defaults.resolve(name, task_backend)
    args_list, kwargs_dict = validation.check_payload(
        args, kwargs, max_bytes=defaults.max_payload_bytes
    )
    when, delay_seconds = validation.check_run_at(run_at, delay)
    key = validation.check_dedupe_key(dedupe_key)
    values = {
        "name": name,
        "args": args_list,
        "kwargs": kwargs_dict,
        "queue": validation.check_queue(queue if queue is not None else defaults.queue),
        "priority": validation.check_priority(
            priority if priority is not None else defaults.priority
        ),
        "max_attempts": validation.check_max_attempts(
            max_attempts if max_attempts is not None else defaults.max_attempts
        ),
        "lease_seconds": defaults.lease,
        "dedupe_key": key,
        "live_dedupe_key": key,
        "task_backend": task_backend,
    }
    if when is not None:
        values["run_at"] = when
    elif delay_seconds is not None:
        values["run_at"] = (now or db_now()) + dt.timedelta(seconds=delay_seconds)
    elif now is not None:
        values["run_at"] = now
    return values


def _build(name: str, args: Sequence[Any], kwargs: dict[str, Any], **options: Any) -> Job:
    """Validate everything and return an unsaved row; raise before anything is written."""
    return Job(**_values(name, args, kwargs, **options))


def _enqueue_values(values: dict[str, Any], using: str) -> Job:
    """Persist one validated row: on PostgreSQL without a dedupe key, straight from the values
    (no model instance to build first, see ``pg_insert``); otherwise through ``_insert``."""
    if values["dedupe_key"] is not None or connections[using].vendor != "postgresql":
        return _insert(Job(**values), using)
    return _enqueued(pg_insert.insert_one(values, using), using)


def _enqueued(job: Job, using: str) -> Job:
    logger.info("job.enqueued id=%s name=%s queue=%s", job.pk, job.name, job.queue)
    _announce_enqueued(job, using)
    return job


def _insert(job: Job, using: str) -> Job:
    """INSERT one row; with a dedupe key, return the live job holding it instead.

    The unique constraint on ``live_dedupe_key`` is the only authority: racing producers both try
    to insert, one wins, the other gets IntegrityError inside a savepoint (so the caller's
    transaction survives) and returns the winner's row.
    """
    connection = connections[using]
    connection.ensure_connection()
    client_encoding.check_sendable(
        ((f.name, getattr(job, f.attname)) for f in Job._meta.concrete_fields), connection
    )
    if job.dedupe_key is None:
        _save(job, using)
        return _enqueued(job, using)
    for _ in range(5):
        holder = Job.objects.using(using).filter(live_dedupe_key=job.dedupe_key).first()
        if holder is not None:
            return holder
        try:
            with transaction.atomic(using=using):
                _save(job, using)
        except IntegrityError:
            job.pk = None
            continue
        logger.info(
            "job.enqueued id=%s name=%s queue=%s dedupe_key=%s",
            job.pk,
            job.name,
            job.queue,
            job.dedupe_key,
        )
        _announce_enqueued(job, using)
        return job
    raise JobValidationError(
        f"dedupe_key {job.dedupe_key!r} kept changing hands; nothing was enqueued."
    )


def _save(job: Job, using: str) -> None:
    """INSERT the row (in the caller's transaction, if any) and read back database defaults."""
    if connections[using].vendor == "postgresql":
        _save_postgresql(job, using)
    else:
        job.save(using=using, force_insert=True)
        _refresh_defaults(job, using)


def _save_postgresql(job: Job, using: str) -> None:
    """One statement: INSERT ... RETURNING, and the NOTIFY that wakes idle workers.

    Columns with a database default and no value (``run_at``, ``created_at``) are left out of
    the INSERT and read back, as Django's own ``save()`` does.
    """
    given = {f: f.pre_save(job, True) for f in Job._meta.concrete_fields if not f.primary_key}
    values = {f.name: v for f, v in given.items() if not isinstance(v, DatabaseDefault)}
    saved = pg_insert.insert_one(values, using)
    for field in Job._meta.concrete_fields:
        if field.primary_key or field.name not in values:
            setattr(job, field.attname, getattr(saved, field.attname))
    job._state.adding = False
    job._state.db = using


def _announce_enqueued(job: Job, using: str) -> None:
    if signals.wanted(signals.job_enqueued):
        signals.send_after_commit(signals.job_enqueued, using, job=job)


def _announce(signal: Any, alias: str, job_ids: Iterable[int], **extra: Any) -> None:
    """Send a finish signal with each job's name and queue (read only when someone listens)."""
    if not signals.wanted(signal):
        return
    attempts = dict(extra.pop("attempts"))
    rows = Job.objects.using(alias).filter(pk__in=list(job_ids)).values_list("pk", "name", "queue")
    for job_id, name, queue in rows:
        signals.send_after_commit(
            signal,
            alias,
            job_id=job_id,
            name=name,
            queue=queue,
            attempt=attempts[job_id],
            **extra,
        )


def _refresh_defaults(job: Job, using: str) -> None:
    """Databases without INSERT ... RETURNING leave database defaults unread; read them."""
    stale = [f for f in ("run_at", "created_at") if isinstance(getattr(job, f), DatabaseDefault)]
    if stale:
        job.refresh_from_db(using=using, fields=stale)


def enqueue(
    name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, **options: Any
) -> Job:
    """Persist one job in the caller's transaction (one INSERT) and return it."""
    if not options:  # the usual call: only the arguments are new
        return _enqueue_plain(_plain_row(name), args, kwargs or {})
    unknown = set(options) - set(ENQUEUE_OPTIONS)
    if unknown:
        raise JobValidationError(f"Unknown enqueue options: {', '.join(sorted(unknown))}.")
    return _enqueue_values(_values(name, args, kwargs or {}, **options), _alias())


class _PlainRow(NamedTuple):
    """A registered job's validated row for an enqueue without options (all but its
    arguments), and the payload cap."""

    values: dict[str, Any]
    max_bytes: int


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
    )
    found = _plain_rows.get(key)
    if found is None:
        defaults = _Defaults.resolve(name)
        found = _PlainRow(_values(name, (), {}, defaults=defaults), defaults.max_payload_bytes)
        _plain_rows[key] = found
    return found


def _enqueue_plain(plain: _PlainRow, args: Sequence[Any], kwargs: dict[str, Any]) -> Job:
    args_list, kwargs_dict = validation.check_payload(args, kwargs, max_bytes=plain.max_bytes)
    return _enqueue_values({**plain.values, "args": args_list, "kwargs": kwargs_dict}, _alias())


def _forget_plain_rows(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith(conf_settings_prefix):
        _plain_rows.clear()


setting_changed.connect(_forget_plain_rows, dispatch_uid="django_leasejobs.lifecycle")


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
    unknown = set(options) - set(ENQUEUE_OPTIONS)
    if unknown:
        raise JobValidationError(f"Unknown enqueue options: {', '.join(sorted(unknown))}.")
    if not task_backend:
        raise JobValidationError("enqueue_task needs the TASKS alias the task came through.")
    values = _values(path, args, kwargs, task_backend=task_backend, **options)
    return _enqueue_values(values, _alias())


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
    """Validate every item and insert them in bulk in one transaction.

    Items with a dedupe key go through the single-row path (they may return an existing job);
    the rest are one multi-row INSERT per chunk (one INSERT each on MySQL 8, which cannot return
    the ids of a multi-row INSERT). Jobs come back in the order given. On PostgreSQL the items
    are validated chunk by chunk while the database inserts the previous chunk; an invalid item
    raises inside the transaction, which is rolled back whole: nothing is written either way.
    Python's cyclic garbage collector is paused while the items are read, the rows validated and
    the jobs built, not while signals are sent or a dedupe insert waits (``gc_pause``).
    """
    alias = _alias()
    with gc_pause.paused():
        parsed = [_item(item) for item in items]
    if not parsed:
        return []
    now = db_now()
    defaults = _Defaults.resolve(name)
    # Items without options (the usual bulk) share one validated row; only their arguments
    # differ and are checked one by one.
    plain_row = _values(name, (), {}, now=now, defaults=defaults)
    checked = (
        _values(name, args, kwargs, now=now, defaults=defaults, **options)
        if options
        else _with_payload(plain_row, args, kwargs, defaults.max_payload_bytes)
        for args, kwargs, options in parsed
    )
    if connections[alias].vendor == "postgresql":
        rows: list[dict[str, Any]] = []

        def without_dedupe_key() -> Iterator[dict[str, Any]]:
            # Lazy, so pg_insert validates a chunk while the previous one is inserted.
            for row in checked:
                rows.append(row)
                if row["dedupe_key"] is None:
                    yield row

        with transaction.atomic(using=alias):
            with gc_pause.paused():
                inserted = iter(pg_insert.insert_many(without_dedupe_key(), alias))
            result = [
                next(inserted) if r["dedupe_key"] is None else _insert(Job(**r), alias)
                for r in rows
            ]
            due = sorted({r["queue"] for r in rows if r["run_at"] <= now})
            if due and notify.supported(alias):
                with connections[alias].cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_notify(%s, queue) FROM unnest(%s::text[]) AS queue",
                        [notify.CHANNEL, due],
                    )
        if signals.wanted(signals.job_enqueued):
            for row, job in zip(rows, result, strict=True):
                if row["dedupe_key"] is None:  # _insert() announced the others
                    _announce_enqueued(job, alias)
        logger.info("job.enqueued_many name=%s count=%s", name, len(result))
        return result
    with gc_pause.paused():
        jobs = [Job(**r) for r in checked]
    with transaction.atomic(using=alias):
        plain = [job for job in jobs if job.dedupe_key is None]
        if connections[alias].features.can_return_rows_from_bulk_insert:
            Job.objects.using(alias).bulk_create(plain, batch_size=1000)
        else:
            # MySQL 8 cannot return ids from a multi-row INSERT (MariaDB 10.5+, PostgreSQL and
            # SQLite can): one INSERT per row, still in this one transaction.
            for job in plain:
                job.save(using=alias, force_insert=True)
        result = [job if job.dedupe_key is None else _insert(job, alias) for job in jobs]
    for job in plain:
        _refresh_defaults(job, alias)
        _announce_enqueued(job, alias)
    logger.info("job.enqueued_many name=%s count=%s", name, len(result))
    return result


def _with_payload(
    row: dict[str, Any], args: Sequence[Any], kwargs: dict[str, Any], max_bytes: int
) -> dict[str, Any]:
    args_list, kwargs_dict = validation.check_payload(args, kwargs, max_bytes=max_bytes)
    return {**row, "args": args_list, "kwargs": kwargs_dict}


# --------------------------------------------------------------------------- claim


_CLAIM_POSTGRESQL_SET = """
UPDATE {table} AS j
SET status = 'running',
    attempt = j.attempt + 1,
    lease_owner = %s,
    lease_expires_at = STATEMENT_TIMESTAMP()
        + make_interval(secs => COALESCE(j.lease_seconds, %s)),
    started_at = STATEMENT_TIMESTAMP()
-- ANY(ARRAY(...)) rather than a join with "due": the planner then always fetches the claimed
-- rows by primary key, where a join may hash the whole table (a seq scan per claim).
-- The status test again: the compare-and-set, in case the row changed after the snapshot.
WHERE j.id = ANY(ARRAY(SELECT id FROM due)) AND j.status IN ('pending', 'failed')
RETURNING {columns}
"""

# A claimed job comes back without its error history, result and last error: a worker needs
# none of them, and decoding a retried job's tracebacks on every claim is the costliest part of
# reading the rows back. Django loads them on access, like any deferred field.
_NOT_CLAIMED = ("errors", "result", "last_error")


def _claimed_columns(qn: Callable[[str], str]) -> str:
    return ", ".join(
        f"j.{qn(str(f.column))}" for f in Job._meta.concrete_fields if f.name not in _NOT_CLAIMED
    )


_CLAIM_POSTGRESQL = (
    """
WITH due AS (
    SELECT id FROM {table}
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP() AND queue = %s
    ORDER BY priority DESC, run_at, id
    LIMIT %s
    -- SKIP LOCKED: a row another claimer is taking is passed over, not waited for, so
    -- concurrent workers split the due rows instead of queueing behind one another.
    FOR UPDATE SKIP LOCKED
)"""
    + _CLAIM_POSTGRESQL_SET
)

# Several queues, or all of them. The claimable index leads with the queue, so one ordered scan
# cannot serve them all (PostgreSQL would sort every due row on each claim, a cost that grows
# with the backlog). Instead: list the queues (given, or found with a loose index scan that
# reads one index entry per queue), take the first ``batch`` due rows of each queue from the
# index, and keep the best ``batch`` of those. Rows locked but not kept are freed at commit.
_CLAIM_POSTGRESQL_QUEUES = (
    """
WITH RECURSIVE queues(queue) AS ({queues}),
due AS (
    SELECT c.id FROM queues AS q CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {table}
        WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
          AND queue = q.queue
        ORDER BY priority DESC, run_at, id
        LIMIT %s
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE q.queue IS NOT NULL
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT %s
)"""
    + _CLAIM_POSTGRESQL_SET
)

_GIVEN_QUEUES = "SELECT unnest(%s::text[])"
_EVERY_QUEUE = """
    (SELECT queue FROM {table} WHERE status IN ('pending', 'failed') ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT t.queue FROM {table} AS t
            WHERE t.status IN ('pending', 'failed') AND t.queue > q.queue
            ORDER BY t.queue LIMIT 1)
    FROM queues AS q WHERE q.queue IS NOT NULL
"""

# SQLite has no row locks: the whole UPDATE takes the database's single write lock, so the
# subquery and the guarded update see one consistent state and two claimers cannot both win.
_CLAIM_SQLITE = """
UPDATE {table}
SET status = 'running',
    attempt = attempt + 1,
    lease_owner = %s,
    lease_expires_at = STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f000', 'NOW',
        '+' || COALESCE(lease_seconds, %s) || ' seconds'),
    started_at = STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f000', 'NOW')
WHERE id IN (
    SELECT id FROM {table}
    WHERE status IN ('pending', 'failed')
      AND run_at <= STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f000', 'NOW') {queue_filter}
    ORDER BY priority DESC, run_at, id
    LIMIT %s
) AND status IN ('pending', 'failed')
RETURNING *
"""


def _queue_filter(queues: Sequence[str] | None) -> tuple[str, list[str]]:
    if queues is None:
        return "", []
    if len(queues) == 1:  # plain equality keeps the claim an ordered index scan
        return "AND queue = %s", list(queues)
    return f"AND queue IN ({', '.join(['%s'] * len(queues))})", list(queues)


def _claim_postgresql(
    table: str,
    columns: str,
    queues: Sequence[str] | None,
    batch: int,
    worker_id: str,
    lease_seconds: float,
) -> tuple[str, list[Any]]:
    if queues is not None and len(queues) == 1:
        return _CLAIM_POSTGRESQL.format(table=table, columns=columns), [
            queues[0],
            batch,
            worker_id,
            lease_seconds,
        ]
    if queues is None:
        source, source_params = _EVERY_QUEUE.format(table=table), []
    else:
        source, source_params = _GIVEN_QUEUES, [list(queues)]
    sql = _CLAIM_POSTGRESQL_QUEUES.format(table=table, columns=columns, queues=source)
    return sql, [*source_params, batch, batch, worker_id, lease_seconds]


def claim(
    worker_id: str,
    *,
    queues: Sequence[str] | None = None,
    batch: int = 1,
    lease_seconds: float = 60.0,
) -> list[Job]:
    """Lease up to ``batch`` due jobs to ``worker_id``; each claim increments ``attempt``.

    Order: priority (high first), then ``run_at``, then id. ``queues=None`` means every queue.
    """
    if batch < 1:
        return []
    if queues is not None and not queues:
        return []
    alias = _alias()
    connection = connections[alias]
    table = connection.ops.quote_name(Job._meta.db_table)
    queue_sql, queue_params = _queue_filter(queues)
    if connection.vendor == "postgresql":
        columns = _claimed_columns(connection.ops.quote_name)
        sql, params = _claim_postgresql(table, columns, queues, batch, worker_id, lease_seconds)
        jobs = job_rows.fetch_jobs(connection, alias, sql, params)
    elif connection.vendor == "sqlite":
        sql = _CLAIM_SQLITE.format(table=table, queue_filter=queue_sql)
        params = [worker_id, lease_seconds, *queue_params, batch]
        jobs = list(Job.objects.using(alias).raw(sql, params))
    else:
        jobs = _claim_locking(alias, worker_id, queues, batch, lease_seconds)
    jobs.sort(key=lambda j: (-j.priority, j.run_at, j.pk))
    started = signals.wanted(signals.job_started)
    for job in jobs:
        logger.info(
            "job.running id=%s name=%s attempt=%s queue=%s worker=%s",
            job.pk,
            job.name,
            job.attempt,
            job.queue,
            worker_id,
        )
        if started:
            signals.send_after_commit(signals.job_started, alias, job=job, worker_id=worker_id)
    return jobs


_CLAIM_PAGES = 4
"""Candidate pages a MySQL/MariaDB claim tries when other claimers hold the first ones."""


def _claim_locking(
    alias: str, worker_id: str, queues: Sequence[str] | None, batch: int, lease_seconds: float
) -> list[Job]:
    """MySQL/MariaDB: lock due rows with SKIP LOCKED, update them guarded, read them back.

    InnoDB locks every row a locking read *reads*, and ``ORDER BY ... LIMIT`` on the claimable
    rows reads them all into a sort before the limit applies: one ``SELECT ... ORDER BY ... LIMIT
    n FOR UPDATE SKIP LOCKED`` would lock the whole due backlog and leave concurrent claimers
    nothing. So the order comes from a plain (non-locking) read of candidate ids, and the locking
    read names those ids with no ORDER BY or LIMIT, which makes it lock only them (rows another
    claimer holds are skipped). A candidate page taken entirely by other claimers moves on to the
    next page, a few times at most. Under READ COMMITTED (Django's default on MySQL) the
    non-locking read sees only committed claims, and the locking read re-checks the status.
    """
    due = Job.objects.using(alias).filter(status__in=CLAIMABLE, run_at__lte=DbNow())
    if queues is not None:
        due = due.filter(queue__in=list(queues))
    order = ("-priority", "run_at", "id")
    with transaction.atomic(using=alias):
        ids: list[int] = []
        seen: list[int] = []
        for _ in range(_CLAIM_PAGES):
            candidates = list(
                due.exclude(id__in=seen)
                .order_by(*order)
                .values_list("id", flat=True)[: batch - len(ids)]
            )
            if not candidates:
                break
            seen.extend(candidates)
            ids.extend(
                due.filter(id__in=candidates)
                .order_by()  # no ORDER BY: nothing to sort, so only the candidates are read
                .select_for_update(skip_locked=True)
                .values_list("id", flat=True)
            )
            if len(ids) >= batch:
                break
        if not ids:
            return []
        claimed = Job.objects.using(alias).filter(id__in=ids, status__in=CLAIMABLE)
        # Per-job lease: rows with their own lease_seconds are updated separately.
        custom = list(claimed.exclude(lease_seconds=None).values_list("id", "lease_seconds"))
        for job_id, seconds in custom:
            Job.objects.using(alias).filter(id=job_id, status__in=CLAIMABLE).update(
                status=Status.RUNNING,
                attempt=F("attempt") + 1,
                lease_owner=worker_id,
                lease_expires_at=_after(seconds or lease_seconds),
                started_at=DbNow(),
            )
        claimed.filter(lease_seconds=None).update(
            status=Status.RUNNING,
            attempt=F("attempt") + 1,
            lease_owner=worker_id,
            lease_expires_at=_after(lease_seconds),
            started_at=DbNow(),
        )
        return list(
            Job.objects.using(alias).filter(
                id__in=ids, status=Status.RUNNING, lease_owner=worker_id
            )
        )


# --------------------------------------------------------------------------- heartbeat


def _tokens_q(tokens: Iterable[tuple[int, int]]) -> Q:
    tokens = list(tokens)
    q = Q(pk__in=[])
    for job_id, attempt in tokens:
        q |= Q(pk=job_id, attempt=attempt)
    # The leading ``id IN (...)`` lets the planner use the primary key: with only the OR of
    # (id, attempt) pairs beside ``status = ...``, PostgreSQL chose the status index and read
    # every finished row of the table on each heartbeat and grouped completion.
    return Q(pk__in=[job_id for job_id, _ in tokens]) & q


@retry_deadlocks
def heartbeat(
    worker_id: str, tokens: Iterable[tuple[int, int]], *, lease_seconds: float = 60.0
) -> set[int]:
    """Extend the leases of a worker's in-flight jobs; return the ids whose lease was lost.

    One UPDATE per distinct lease length (usually one), guarded by (id, attempt) and status. A
    job missing from the result of that guard has been reclaimed or finished by someone else:
    its handler must be told, and the worker must never write that attempt again.
    """
    tokens = list(tokens)
    if not tokens:
        return set()
    alias = _alias()
    if connections[alias].vendor == "postgresql":
        kept = _heartbeat_postgresql(alias, worker_id, tokens, lease_seconds)
        lost = {job_id for job_id, _ in tokens} - kept
        for job_id in sorted(lost):
            logger.warning("job.lease_lost id=%s worker=%s", job_id, worker_id)
        return lost
    by_lease: dict[float, list[tuple[int, int]]] = {}
    leases = dict(
        Job.objects.using(alias)
        .filter(pk__in=[job_id for job_id, _ in tokens])
        .values_list("pk", "lease_seconds")
    )
    for token in tokens:
        seconds = leases.get(token[0]) or lease_seconds
        by_lease.setdefault(seconds, []).append(token)
    for seconds, group in by_lease.items():
        Job.objects.using(alias).filter(
            _tokens_q(group), status=Status.RUNNING, lease_owner=worker_id
        ).update(lease_expires_at=_after(seconds))
    kept = set(
        Job.objects.using(alias)
        .filter(_tokens_q(tokens), status=Status.RUNNING, lease_owner=worker_id)
        .values_list("pk", flat=True)
    )
    lost = {job_id for job_id, _ in tokens} - kept
    for job_id in sorted(lost):
        logger.warning("job.lease_lost id=%s worker=%s", job_id, worker_id)
    return lost


_HEARTBEAT_POSTGRESQL = """
UPDATE {table} AS j
SET lease_expires_at = STATEMENT_TIMESTAMP()
    + make_interval(secs => COALESCE(j.lease_seconds, %s))
FROM unnest(%s::bigint[], %s::bigint[]) AS t(id, attempt)
WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running' AND j.lease_owner = %s
RETURNING j.id
"""


def _heartbeat_postgresql(
    alias: str, worker_id: str, tokens: list[tuple[int, int]], lease_seconds: float
) -> set[int]:
    """One statement for all in-flight jobs, each row fenced; RETURNING names the kept ones."""
    connection = connections[alias]
    sql = _HEARTBEAT_POSTGRESQL.format(table=connection.ops.quote_name(Job._meta.db_table))
    ids = _int_array([job_id for job_id, _ in tokens])
    attempts = _int_array([attempt for _, attempt in tokens])
    with connection.cursor() as cursor:
        cursor.execute(sql, [lease_seconds, ids, attempts, worker_id])
        return {row[0] for row in cursor.fetchall()}


# --------------------------------------------------------------------------- complete


def _succeeded_fields(result: Any, finished_by: str = "") -> dict[str, Any]:
    return {
        "status": Status.SUCCEEDED,
        "finished_at": DbNow(),
        "lease_owner": "",
        "finished_by": finished_by,
        "lease_expires_at": None,
        "live_dedupe_key": None,
        "result": result,
    }


@retry_deadlocks
def complete(job_id: int, attempt: int, result: Any = None, *, finished_by: str = "") -> Outcome:
    """Mark the job succeeded, only if ``attempt`` still owns it.

    ``finished_by`` (a worker id) records who ran the successful attempt (the tasks backend
    reports it in ``worker_ids``).
    """
    try:
        validation.check_json(result, "result")
    except JobValidationError as exc:
        return fail(job_id, attempt, Failure(f"Unstorable return value: {exc}"), retryable=False)
    alias = _alias()
    changed = (
        Job.objects.using(alias)
        .filter(pk=job_id, attempt=attempt, status=Status.RUNNING)
        .update(**_succeeded_fields(result, finished_by))
    )
    if changed:
        _announce(signals.job_succeeded, alias, [job_id], attempts={job_id: attempt}, result=result)
    return _report(changed, "succeeded", job_id, attempt, Outcome.SUCCEEDED)


_COMPLETE_POSTGRESQL = """
UPDATE {table} AS j
SET status = 'succeeded', finished_at = STATEMENT_TIMESTAMP(), lease_owner = '',
    finished_by = %s, lease_expires_at = NULL, live_dedupe_key = NULL,
    -- JSON null and "no result" are both stored as SQL NULL, as complete() does.
    result = NULLIF(t.result, 'null'::jsonb)
FROM unnest(%s::bigint[], %s::bigint[], %s::jsonb[]) AS t(id, attempt, result)
WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running'
RETURNING j.id
"""


def complete_many(
    tokens: Iterable[tuple[int, int] | tuple[int, int, Any]], *, finished_by: str = ""
) -> dict[int, Outcome]:
    """Mark many jobs succeeded in one statement, each row fenced by its own token.

    Each item is ``(id, attempt)`` or ``(id, attempt, result)``; ``finished_by`` is the worker
    id recorded on each row, as ``complete()`` does. On PostgreSQL this is one
    UPDATE ... RETURNING (the rows it returns are the ones that succeeded; the others are
    stale). A result that cannot be stored fails its job, as ``complete()`` does.
    """
    items = list(tokens)
    if not items:
        return {}
    alias = _alias()
    outcomes: dict[int, Outcome] = {}
    storable: list[tuple[int, int, Any]] = []
    for item in items:
        job_id, attempt = item[0], item[1]
        result = item[2] if len(item) > 2 else None
        try:
            validation.check_json(result, "result")
        except JobValidationError:
            # fails it, non-retryable
            outcomes[job_id] = complete(job_id, attempt, result, finished_by=finished_by)
            continue
        storable.append((job_id, attempt, result))
    if connections[alias].vendor == "postgresql":
        done = _complete_postgresql(alias, storable, finished_by)
        for job_id, attempt, _ in storable:
            outcomes[job_id] = _report(
                int(job_id in done), "succeeded", job_id, attempt, Outcome.SUCCEEDED
            )
        if done and signals.wanted(signals.job_succeeded):
            plain = {i: a for i, a, result in storable if i in done and result is None}
            if plain:
                _announce(signals.job_succeeded, alias, plain, attempts=plain, result=None)
            for i, a, result in storable:
                if i in done and result is not None:
                    _announce(signals.job_succeeded, alias, [i], attempts={i: a}, result=result)
        return outcomes
    if any(result is not None for _, _, result in storable):
        for job_id, attempt, result in storable:
            outcomes[job_id] = complete(job_id, attempt, result, finished_by=finished_by)
        return outcomes
    pairs = [(job_id, attempt) for job_id, attempt, _ in storable]
    if not pairs:
        return outcomes
    done = _complete_plain(alias, pairs, finished_by)
    for job_id, attempt in pairs:
        outcomes[job_id] = _report(
            int(job_id in done), "succeeded", job_id, attempt, Outcome.SUCCEEDED
        )
    if done:
        succeeded = {job_id: attempt for job_id, attempt in pairs if job_id in done}
        _announce(signals.job_succeeded, alias, succeeded, attempts=succeeded, result=None)
    return outcomes


@retry_deadlocks
def _complete_plain(alias: str, pairs: list[tuple[int, int]], finished_by: str) -> set[int]:
    """The grouped completion without RETURNING: one fenced UPDATE, then read back the winners."""
    Job.objects.using(alias).filter(_tokens_q(pairs), status=Status.RUNNING).update(
        **_succeeded_fields(None, finished_by)
    )
    return set(
        Job.objects.using(alias)
        .filter(_tokens_q(pairs), status=Status.SUCCEEDED)
        .values_list("pk", flat=True)
    )


@retry_deadlocks
def _complete_postgresql(
    alias: str, items: list[tuple[int, int, Any]], finished_by: str
) -> set[int]:
    if not items:
        return set()
    connection = connections[alias]
    sql = _COMPLETE_POSTGRESQL.format(table=connection.ops.quote_name(Job._meta.db_table))
    ids = _int_array([job_id for job_id, _, _ in items])
    attempts = _int_array([attempt for _, attempt, _ in items])
    if all(result is None for _, _, result in items):
        results: Any = None  # NULL array: unnest pads the result column with NULLs
    else:
        results = [json.dumps(result) for _, _, result in items]
    with connection.cursor() as cursor:
        cursor.execute(sql, [finished_by, ids, attempts, results])
        return {row[0] for row in cursor.fetchall()}


def _int_array(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers: one string parameter, not a list to adapt.

    psycopg adapts a Python list element by element in Python; on the grouped completion of a
    large batch that was a tenth of the worker's time. ``int()`` keeps the literal safe.
    """
    return "{" + ",".join(str(int(value)) for value in values) + "}"


def complete_in_transaction(job_id: int, attempt: int, result: Any = None) -> None:
    """Complete the job inside the handler's own transaction (exactly-once database effects).

    Raises ``StaleAttemptError`` when the token no longer owns the job, so the handler's writes
    roll back with it.
    """
    alias = _alias()
    if not connections[alias].in_atomic_block:
        raise RuntimeError("ctx.complete() must be called inside transaction.atomic().")
    validation.check_json(result, "result")
    changed = (
        Job.objects.using(alias)
        .filter(pk=job_id, attempt=attempt, status=Status.RUNNING)
        .update(**_succeeded_fields(result))
    )
    if not changed:
        logger.warning("job.stale id=%s attempt=%s action=succeeded", job_id, attempt)
        raise StaleAttemptError(f"Job {job_id} attempt {attempt} no longer holds its lease.")
    logger.info("job.succeeded id=%s attempt=%s in_transaction=true", job_id, attempt)
    _announce(signals.job_succeeded, alias, [job_id], attempts={job_id: attempt}, result=result)


def _report(changed: int, action: str, job_id: int, attempt: int, outcome: Outcome) -> Outcome:
    if not changed:
        logger.warning("job.stale id=%s attempt=%s action=%s", job_id, attempt, action)
        return Outcome.STALE
    # DEBUG: the worker logs the same transition at INFO with name, queue and duration.
    logger.debug("job.%s id=%s attempt=%s", action, job_id, attempt)
    return outcome


# --------------------------------------------------------------------------- fail / retry / dead


def fail(
    job_id: int,
    attempt: int,
    failure: Failure,
    *,
    retryable: bool = True,
    backoff: Backoff | None = None,
) -> Outcome:
    """Record a failed attempt: retry after backoff, or dead-letter when none is left."""
    return _fail(job_id, attempt, failure, retryable=retryable, backoff=backoff)


@retry_deadlocks
def _fail(
    job_id: int,
    attempt: int,
    failure: Failure,
    *,
    retryable: bool,
    backoff: Backoff | None,
    expired_only: bool = False,
) -> Outcome:
    alias = _alias()
    guard = Q(pk=job_id, attempt=attempt, status=Status.RUNNING)
    if expired_only:
        guard &= Q(lease_expires_at__lt=DbNow())
    with transaction.atomic(using=alias):
        row = (
            Job.objects.using(alias)
            .filter(guard)
            .annotate(db_now=DbNow())
            .values(
                "name",
                "args",
                "kwargs",
                "queue",
                "errors",
                "max_attempts",
                "released",
                "lease_owner",
                "db_now",
            )
            .first()
        )
        if row is None:
            return _report(0, "failed", job_id, attempt, Outcome.STALE)
        entry = {
            "attempt": attempt,
            "worker": row["lease_owner"],
            "at": _as_aware(row["db_now"]).isoformat(),
            "kind": failure.kind,
            "error": failure.error,
            "traceback": failure.traceback,
        }
        errors = [*row["errors"], entry]
        charged = attempt - row["released"]
        if not retryable or charged >= row["max_attempts"]:
            reason = failure.kind if not retryable else "attempts exhausted"
            changed = (
                Job.objects.using(alias)
                .filter(guard)
                .update(
                    status=Status.DEAD,
                    finished_at=DbNow(),
                    lease_owner="",
                    lease_expires_at=None,
                    live_dedupe_key=None,
                    last_error=failure.error,
                    errors=errors,
                )
            )
            if not changed:
                return _report(0, "dead", job_id, attempt, Outcome.STALE)
            dead_letter = DeadLetter.objects.using(alias).create(
                job_id=job_id,
                name=row["name"],
                args=row["args"],
                kwargs=row["kwargs"],
                queue=row["queue"],
                reason=reason[:200],
                errors=errors,
            )
            logger.warning(
                "job.dead id=%s name=%s attempt=%s reason=%s error=%s",
                job_id,
                row["name"],
                attempt,
                reason,
                failure.headline,
            )
            if signals.wanted(signals.job_dead):
                signals.send_after_commit(
                    signals.job_dead,
                    alias,
                    job_id=job_id,
                    name=row["name"],
                    queue=row["queue"],
                    attempt=attempt,
                    reason=dead_letter.reason,
                    error=failure.error,
                    dead_letter=dead_letter,
                )
            return Outcome.DEAD
        job_function = registry.lookup(row["name"])
        policy = backoff or (
            job_function.get_backoff() if job_function else Backoff.from_settings()
        )
        delay = policy.delay(charged)
        changed = (
            Job.objects.using(alias)
            .filter(guard)
            .update(
                status=Status.FAILED,
                run_at=_after(delay),
                lease_owner="",
                lease_expires_at=None,
                last_error=failure.error,
                errors=errors,
            )
        )
        if not changed:
            return _report(0, "failed", job_id, attempt, Outcome.STALE)
        logger.info(
            "job.failed id=%s name=%s attempt=%s error=%s",
            job_id,
            row["name"],
            attempt,
            failure.headline,
        )
        if signals.wanted(signals.job_retried):
            signals.send_after_commit(
                signals.job_retried,
                alias,
                job_id=job_id,
                name=row["name"],
                queue=row["queue"],
                attempt=attempt,
                error=failure.error,
                kind=failure.kind,
                delay=delay,
            )
        return Outcome.RETRIED


def recover_expired(limit: int = 100) -> dict[int, Outcome]:
    """Take back jobs whose lease expired (their worker died or stalled).

    A reclaim is an attempt: the job goes to ``failed`` with backoff (not straight back to the head
    of the queue), or to ``dead`` when its budget is spent, so a job that kills its worker every
    time still ends. Each row is guarded by (id, attempt, running, lease still expired), so a
    heartbeat that lands first wins and the job is left alone. Any worker may run this.
    """
    alias = _alias()
    expired = list(
        Job.objects.using(alias)
        .filter(status=Status.RUNNING, lease_expires_at__lt=DbNow())
        .order_by("lease_expires_at")
        .values_list("pk", "attempt", "lease_owner")[:limit]
    )
    outcomes = {}
    for job_id, attempt, owner in expired:
        failure = Failure(
            f"Lease expired (worker {owner} stopped renewing it).", kind="lease expired"
        )
        outcomes[job_id] = _fail(
            job_id, attempt, failure, retryable=True, backoff=None, expired_only=True
        )
    return outcomes


# --------------------------------------------------------------------------- release


@retry_deadlocks
def release(job_id: int, attempt: int) -> Outcome:
    """Hand a claimed job back unspent (graceful shutdown): pending and due now.

    The token still grows on the next claim; ``released`` makes the attempt free of charge.
    """
    changed = (
        Job.objects.using(_alias())
        .filter(pk=job_id, attempt=attempt, status=Status.RUNNING)
        .update(
            status=Status.PENDING,
            run_at=DbNow(),
            released=F("released") + 1,
            lease_owner="",
            lease_expires_at=None,
        )
    )
    return _report(changed, "released", job_id, attempt, Outcome.RELEASED)


# --------------------------------------------------------------------------- operator actions


def cancel(job_id: int) -> bool:
    """Cancel a job that has not started (pending, or failed and waiting for a retry)."""
    changed = (
        Job.objects.using(_alias())
        .filter(pk=job_id, status__in=CLAIMABLE)
        .update(
            status=Status.CANCELLED,
            finished_at=DbNow(),
            live_dedupe_key=None,
        )
    )
    if changed:
        logger.info("job.cancelled id=%s", job_id)
    return bool(changed)


def run_now(job_id: int) -> bool:
    """Make a pending or failed job due at once (its attempt budget is unchanged)."""
    changed = (
        Job.objects.using(_alias()).filter(pk=job_id, status__in=CLAIMABLE).update(run_at=DbNow())
    )
    if changed:
        logger.info("job.run_now id=%s", job_id)
    return bool(changed)


def retry_now(job_id: int) -> bool:
    """Make a failed job due at once instead of after its backoff (budget unchanged).

    Guarded on ``failed`` alone, so an operator's "retry" never touches a job that was cancelled,
    claimed or finished since the page was shown.
    """
    changed = (
        Job.objects.using(_alias()).filter(pk=job_id, status=Status.FAILED).update(run_at=DbNow())
    )
    if changed:
        logger.info("job.retry_now id=%s", job_id)
    return bool(changed)


class _ReplayRace(Exception):
    pass


def _check_replayable(name: str, task_backend: str) -> None:
    """A replay is an enqueue: refuse, before anything is written, a name that would not run.

    A registered job's name is checked by ``_Defaults.resolve``; a ``django.tasks`` row's path
    is resolved here, once, as a worker would, since an enqueue through the backend never
    stored a path that was not a ``Task`` but the code may have changed since.
    """
    if not task_backend:
        registry.get(name)
        return
    try:
        task_results.resolve(name)
    except (TaskRefusedError, ImproperlyConfigured) as exc:
        raise JobValidationError(f"The task cannot be replayed: {exc}") from None


def replay(
    dead_letter_id: int,
    *,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
) -> Job:
    """Make a new job from a dead letter, with a fresh attempt budget; once only.

    The dead job is never revived (its stale workers' tokens stay stale); the new job is linked
    from the dead letter, and a second replay returns that same job.
    """
    alias = _alias()
    connections[alias].ensure_connection()
    client_encoding.require_utf8(connections[alias], "replay")
    for _ in range(3):
        try:
            with transaction.atomic(using=alias):
                dead_letter = (
                    DeadLetter.objects.using(alias)
                    .select_for_update()
                    .select_related("job")
                    .get(pk=dead_letter_id)
                )
                if dead_letter.replayed_job_id is not None:
                    return Job.objects.using(alias).get(pk=dead_letter.replayed_job_id)
                original = dead_letter.job
                _check_replayable(dead_letter.name, original.task_backend)
                built = _build(
                    dead_letter.name,
                    dead_letter.args if args is None else args,
                    dead_letter.kwargs if kwargs is None else kwargs,
                    queue=original.queue,
                    priority=original.priority,
                    max_attempts=original.max_attempts,
                    dedupe_key=original.dedupe_key,
                    task_backend=original.task_backend,
                )
                new = _insert(built, alias)
                # _insert returns the live job holding the dedupe key instead of inserting. Such
                # a holder is not this replay's job (even while it is pending with attempt 0):
                # linking it would tie an unrelated job to this dead letter, so refuse.
                if new is not built:
                    raise InvalidTransitionError(
                        f"Job {new.pk} already holds dedupe key {original.dedupe_key!r}; "
                        "let it finish or cancel it, then replay."
                    )
                changed = (
                    DeadLetter.objects.using(alias)
                    .filter(pk=dead_letter.pk, replayed_job__isnull=True)
                    .update(replayed_job=new, replayed_at=DbNow())
                )
                if not changed:
                    raise _ReplayRace
                logger.info(
                    "job.replayed dead_letter=%s old=%s new=%s", dead_letter.pk, original.pk, new.pk
                )
                return new
        except (_ReplayRace, IntegrityError):
            continue
    dead_letter = DeadLetter.objects.using(alias).get(pk=dead_letter_id)
    if dead_letter.replayed_job_id is None:
        raise InvalidTransitionError(f"Dead letter {dead_letter_id} could not be replayed.")
    return Job.objects.using(alias).get(pk=dead_letter.replayed_job_id)


# --------------------------------------------------------------------------- effects


def record_effect(key: str, job_id: int | None = None) -> bool:
    """Record ``key`` as done in the caller's transaction; False if it was already recorded.

    Must run inside ``transaction.atomic()`` together with the writes it guards, so the key and
    the effect commit or roll back together.
    """
    alias = _alias()
    if not connections[alias].in_atomic_block:
        raise RuntimeError(
            "ctx.first_time() must be called inside transaction.atomic(), with the writes "
            "it guards."
        )
    if not isinstance(key, str) or not key or len(key) > 255:
        raise ValueError("An effect key is a non-empty string of at most 255 characters.")
    try:
        with transaction.atomic(using=alias):
            Effect.objects.using(alias).create(key=key, job_id=job_id)
    except IntegrityError:
        return False
    return True


# --------------------------------------------------------------------------- schedules


def _advance_cursor(alias: str, schedule: Schedule, to: dt.datetime) -> bool:
    """Compare-and-set the schedule's cursor from the value this scheduler read to ``to``.

    The guard is the whole of the once-per-occurrence protocol between schedulers: whoever moves
    the cursor first owns the occurrences up to ``to``; a concurrent scheduler's UPDATE then
    matches no row (PostgreSQL re-checks the WHERE on the row it waited for) and it backs off.
    """
    expected = schedule.last_occurrence_at
    if expected is not None and to <= expected:
        raise ValueError(f"A schedule's cursor only moves forward ({expected} -> {to}).")
    guard = Q(pk=schedule.pk) & (
        Q(last_occurrence_at__isnull=True) if expected is None else Q(last_occurrence_at=expected)
    )
    return bool(Schedule.objects.using(alias).filter(guard).update(last_occurrence_at=to))


def _cursor_lost(alias: str, schedule: Schedule, action: str, occurrence_at: dt.datetime) -> None:
    """Another scheduler moved the cursor first: read where it is now, and say so."""
    seen = schedule.last_occurrence_at
    schedule.last_occurrence_at = (
        Schedule.objects.using(alias)
        .filter(pk=schedule.pk)
        .values_list("last_occurrence_at", flat=True)
        .first()
    )
    logger.debug(
        "schedule.cursor_moved name=%s action=%s occurrence=%s expected=%s found=%s",
        schedule.name,
        action,
        occurrence_at.isoformat(),
        seen.isoformat() if seen else None,
        schedule.last_occurrence_at.isoformat() if schedule.last_occurrence_at else None,
    )


def emit_occurrence(
    schedule: Schedule, occurrence_at: dt.datetime, run_at: dt.datetime
) -> Job | None:
    """Emit one occurrence of a schedule as a job, and move its cursor, in one transaction.

    Guarded twice: the cursor moves from the value on ``schedule`` (compare-and-set), and the
    INSERT is insert-or-ignore on the unique (schedule, occurrence_at) key, so no interleaving of
    schedulers makes two jobs for one occurrence. Both commit together or not at all: a scheduler
    killed in between leaves neither, and the next tick emits the occurrence (no gap).

    Returns the job, or None when nothing was inserted: either another scheduler had already
    moved the cursor (``schedule.last_occurrence_at`` is then refreshed from the database and is
    not ``occurrence_at``), or the occurrence's job already existed (the cursor had been moved
    back by hand; it now stands at ``occurrence_at``). Raises ``JobValidationError`` before
    writing anything if the schedule's job or arguments are not valid.
    """
    alias = _alias()
    job = _build(
        schedule.job,
        schedule.args,
        schedule.kwargs,
        run_at=run_at,
        queue=schedule.queue or None,
        priority=schedule.priority,
        max_attempts=schedule.max_attempts,
    )
    job.schedule_id = schedule.pk
    job.occurrence_at = occurrence_at
    inserted = False
    with transaction.atomic(using=alias):
        advanced = _advance_cursor(alias, schedule, occurrence_at)
        if advanced:
            try:
                with transaction.atomic(using=alias):  # a savepoint: the cursor move survives
                    job.save(using=alias, force_insert=True)
                inserted = True
            except IntegrityError:
                job.pk = None
                logger.warning(
                    "schedule.occurrence_exists name=%s occurrence=%s",
                    schedule.name,
                    occurrence_at.isoformat(),
                )
    if not advanced:
        _cursor_lost(alias, schedule, "emit", occurrence_at)
        return None
    schedule.last_occurrence_at = occurrence_at
    if not inserted:
        return None
    _refresh_defaults(job, alias)
    if signals.wanted(signals.job_enqueued):
        signals.send_after_commit(signals.job_enqueued, alias, job=job)
    logger.info(
        "schedule.emitted name=%s occurrence=%s job=%s run_at=%s",
        schedule.name,
        occurrence_at.isoformat(),
        job.pk,
        run_at.isoformat(),
    )
    return job


def skip_occurrences(
    schedule: Schedule, through: dt.datetime, *, count: int | None, reason: str
) -> bool:
    """Record occurrences up to ``through`` as skipped and move the cursor past them, at once.

    The same compare-and-set as ``emit_occurrence``; False (and a refreshed cursor on
    ``schedule``) when another scheduler moved the cursor first.
    """
    alias = _alias()
    after = schedule.last_occurrence_at or schedule.created_at
    with transaction.atomic(using=alias):
        moved = _advance_cursor(alias, schedule, through)
        if moved:
            ScheduleSkip.objects.using(alias).create(
                schedule_id=schedule.pk, after=after, through=through, count=count, reason=reason
            )
    if not moved:
        _cursor_lost(alias, schedule, "skip", through)
        return False
    schedule.last_occurrence_at = through
    logger.warning(
        "schedule.skipped name=%s after=%s through=%s count=%s reason=%s",
        schedule.name,
        after.isoformat(),
        through.isoformat(),
        count if count is not None else "many",
        reason,
    )
    return True


# --------------------------------------------------------------------------- pruning

PRUNABLE = (Status.SUCCEEDED, Status.DEAD, Status.CANCELLED)


def _prunable(alias: str, status: str, older_than: dt.timedelta) -> QuerySet[Job]:
    if status not in PRUNABLE:
        raise ValueError(f"Only finished jobs are pruned ({', '.join(PRUNABLE)}), not {status!r}.")
    cutoff = ExpressionWrapper(DbNow() - Value(older_than), output_field=DateTimeField())
    return Job.objects.using(alias).filter(
        # A job a replay created is kept while its dead letter exists: deleting it would clear
        # the dead letter's link, and the dead letter could then be replayed a second time.
        ~Exists(DeadLetter.objects.using(alias).filter(replayed_job=OuterRef("pk"))),
        status=status,
        finished_at__lt=cutoff,
    )


def count_prunable(status: str, older_than: dt.timedelta) -> int:
    """How many ``status`` jobs finished more than ``older_than`` ago (a dry run of pruning)."""
    return _prunable(_alias(), status, older_than).count()


# The rows that point at a job, and what pruning does with them. Any other relation (a model
# of another app with a foreign key to Job) sends pruning through the ORM's collector instead,
# which applies that relation's on_delete. Measured on PostgreSQL with 1M rows: 3,200 rows/s
# direct, 1,800 through the collector (most of the rest is the foreign keys' own checks).
_KNOWN_RELATIONS = {("DeadLetter", "job"), ("DeadLetter", "replayed_job"), ("Effect", "job")}


def _delete_jobs(alias: str, ids: list[int], status: str) -> int:
    """Delete these jobs (still in ``status``) and what hangs off them; return how many went."""
    relations = {(r.related_model.__name__, r.field.name) for r in Job._meta.related_objects}
    if relations != _KNOWN_RELATIONS:
        _, per_model = (
            Job.objects.using(alias).filter(pk__in=ids, status=status).only("pk").delete()
        )
        return per_model.get(Job._meta.label, 0)
    # Effects outlive their job (the key must keep stopping repeats); dead letters do not.
    # Replays' jobs never get here: _prunable skips them while their dead letter exists.
    Effect.objects.using(alias).filter(job_id__in=ids).update(job=None)
    DeadLetter.objects.using(alias).filter(job_id__in=ids).delete()
    connection = connections[alias]
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN ({', '.join(['%s'] * len(ids))}) AND status = %s",
            [*ids, status],
        )
        return cursor.rowcount


def prune_finished(
    status: str, older_than: dt.timedelta, *, batch: int = 1000, after_id: int = 0
) -> tuple[int, int]:
    """Delete one batch of finished jobs; return (jobs deleted, last id looked at).

    Call again with ``after_id`` set to the returned id until it comes back unchanged. Each batch
    is one short transaction over at most ``batch`` rows taken in primary-key order (a keyset
    walk: no rescan of what was deleted, locks always taken in the same order, no gap locks
    beyond the batch on MySQL), with SKIP LOCKED where the database has it so a row someone else
    holds is passed over rather than waited for. Finished rows are never claimed, so pruning
    does not contend with workers.

    Only final states are touched: pending, running and failed jobs cannot match. A dead job
    takes its dead letter with it. Recorded effects are kept (their ``job`` becomes NULL) because
    their keys must outlive the job to keep a later run from repeating the effect. Schedules are
    never touched: their cursor, not the old jobs, is what keeps an occurrence from being emitted
    twice, so pruning cannot reopen one.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, not {batch!r}.")
    alias = _alias()
    with transaction.atomic(using=alias):
        chosen = _prunable(alias, status, older_than).filter(pk__gt=after_id).order_by("pk")
        if connections[alias].features.has_select_for_update_skip_locked:
            chosen = chosen.select_for_update(skip_locked=True)
        ids = list(chosen.values_list("pk", flat=True)[:batch])
        if not ids:
            return 0, after_id
        deleted = _delete_jobs(alias, ids, status)
    logger.info(
        "job.pruned status=%s count=%s first_id=%s last_id=%s", status, deleted, ids[0], ids[-1]
    )
    return deleted, ids[-1]
