"""Reading a job's result, and waiting for the job to finish: ``job.wait()``, ``get_result``.

A wait never holds a transaction: each look at the row is its own autocommit read of one
column by primary key. On PostgreSQL (with ``LEASEJOBS_NOTIFY`` on) the wait listens on its
own connection for the finish notification the protocol sends in the finishing transaction,
and reads the row again when its id is announced (and at least every ``NOTIFIED_RECHECK``
seconds, in case the listening connection broke); elsewhere it polls, from ``POLL_FIRST``
seconds apart up to ``POLL_CAP``. The listening connection is opened only when the job is
not finished at the first look, and closed when the wait ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
import selectors
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.apps import apps
from django.db import connections

from ..core import notify, registry
from ..errors import JobFailedError
from . import FINAL, DeadLetter, Job, Status
from .databases import home_database, job_database, primary_of, queue_databases

logger = logging.getLogger("django_leasejobs")

POLL_FIRST = 0.05
"""Seconds between the first two looks at a job that polling waits for."""
POLL_CAP = 1.0
"""The longest pause between two looks when polling."""
POLL_GROWTH = 1.5
NOTIFIED_RECHECK = 5.0
"""With NOTIFY, the row is read again at least this often even when nothing was announced."""


def job_id_of(value: Any) -> int:
    """A job id given as an ``int`` or a string of digits; ``TypeError``/``ValueError`` else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"A job id is an int (or a string of digits), not {type(value).__name__}.")
    if isinstance(value, str):
        if not (value.strip().isascii() and value.strip().isdecimal()):
            raise ValueError(f"A job id is a whole number, not {value!r}.")
        return int(value)
    return value


def reference(job: Job) -> str:
    """A job's id as a string that finds it again: ``"42"`` in the home queue database,
    ``"jobs2:42"`` in a shard (ids repeat across databases). A ``django.tasks`` result's id."""
    alias = primary_of(job._state.db or job_database())
    return str(job.pk) if alias == home_database() else f"{alias}:{job.pk}"


def located(value: Any, default: str | None = None) -> tuple[str, int]:
    """``(database, id)`` of a job id or :func:`reference` (``"jobs2:42"``, whose database
    must be a queue database); a bare id is in ``default``, else :func:`job_database`."""
    if isinstance(value, str) and ":" in value:
        alias, _, rest = value.partition(":")
        if alias not in queue_databases():
            raise ValueError(
                f"{value!r} names {alias!r}, which is not a queue database "
                f"({', '.join(map(repr, queue_databases()))})."
            )
        return alias, job_id_of(rest)
    return default or job_database(), job_id_of(value)


def fetch(
    job_id: Any,
    *,
    name: str | None = None,
    task_backend: str | None = None,
    database: str | None = None,
) -> Job:
    """The job row now, with its dead letter and the job that replayed it (one query).

    ``name`` / ``task_backend`` restrict the lookup to a job function's own rows or a tasks
    backend's; a row of another raises ``Job.DoesNotExist`` like a missing one. ``job_id``
    may be a :func:`reference`; a bare id is looked up in ``database``, else
    :func:`job_database`.
    """
    using, pk = located(job_id, database)
    rows = Job.objects.using(using).select_related("dead_letter__replayed_job")
    if name is not None:  # a renamed job's rows under its former names (aliases) too
        rows = rows.filter(name__in=registry.names_of(name))
    if task_backend is not None:
        rows = rows.filter(task_backend=task_backend)
    try:
        return rows.get(pk=pk)
    except Job.DoesNotExist:
        raise Job.DoesNotExist(_missing(pk, name)) from None


def _missing(pk: int, name: str | None) -> str:
    return f"No job {pk}" + (f" of {name}." if name else ".")


def timeout_seconds(timeout: Any) -> float | None:
    """``None`` (no limit) or a non-negative finite number of seconds (or a ``timedelta``)."""
    if timeout is None:
        return None
    if isinstance(timeout, dt.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(
            f"timeout is a number of seconds, a timedelta or None, not {type(timeout).__name__}."
        )
    if not math.isfinite(timeout) or timeout < 0:
        raise ValueError(f"timeout must be 0 or more seconds (or None: no limit), not {timeout}.")
    return float(timeout)


def outcome(job: Job) -> Any:
    """A finished job's result; ``JobFailedError`` for one that ended dead or cancelled."""
    if job.status == Status.SUCCEEDED:
        return job.result
    replayed_by = None
    if job.status == Status.DEAD:
        replayed_by = job.dead_letter.replayed_job_id if hasattr(job, "dead_letter") else None
    how = "was cancelled" if job.status == Status.CANCELLED else "is dead"
    message = f"Job {job.pk} ({job.name}) {how}"
    message += f": {job.last_error}" if job.last_error else "."
    if replayed_by is not None:
        message += f" It was replayed as job {replayed_by}."
    raise JobFailedError(
        message,
        job_id=job.pk,
        name=job.name,
        status=job.status,
        error=job.last_error,
        replayed_by=replayed_by,
    )


class _Clock:
    """The deadline of one wait, on the monotonic clock."""

    def __init__(self, job: Job, timeout: Any) -> None:
        seconds = timeout_seconds(timeout)
        self.job_id = job.pk
        self.timeout = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.poll = POLL_FIRST

    def remaining(self) -> float:
        """Seconds left (infinite without a limit); ``TimeoutError`` once there are none."""
        if self.deadline is None:
            return math.inf
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"Job {self.job_id} did not finish within {self.timeout:g} s.")
        return left

    def next_poll(self) -> float:
        pause, self.poll = self.poll, min(self.poll * POLL_GROWTH, POLL_CAP)
        return min(pause, self.remaining())


def _finished(job: Job, using: str) -> bool:
    """Whether the job has finished, read in autocommit; refused inside a transaction."""
    if job.pk is None:
        raise ValueError("This job was never saved: enqueue it (fn.enqueue()) to wait for it.")
    status = Job.objects.using(using).filter(pk=job.pk).values_list("status", flat=True).first()
    if status is None:
        raise Job.DoesNotExist(f"Job {job.pk} no longer exists (pruned or deleted).")
    if status in FINAL:
        return True
    if connections[using].in_atomic_block:
        raise RuntimeError(
            f"job.wait() for job {job.pk}, which is {status}, inside transaction.atomic(): "
            "the job cannot be seen finishing from inside a transaction (and one enqueued in "
            "it cannot even start until it commits). Wait after the atomic block ends."
        )
    return False


def _refresh(job: Job, using: str) -> None:
    """Reload the finished job, and its dead letter with the replay link, so that ``outcome``
    and ``job.replayed_by`` read no more (async code could not)."""
    # Every field named: a field the instance had deferred (a claimed row's result) is loaded
    # now, not on access, where async code could not.
    job.refresh_from_db(using=using, fields=_FIELDS)
    letter = None
    if job.status == Status.DEAD:
        letters = DeadLetter.objects.using(using).select_related("replayed_job")
        letter = letters.filter(job_id=job.pk).first()
    _DEAD_LETTER.set_cached_value(job, letter)


_DEAD_LETTER = Job._meta.get_field("dead_letter")
_FIELDS = [field.attname for field in Job._meta.concrete_fields]


def _notifies(alias: str) -> bool:
    """Whether the database announces finishes: its dialect's capability, asked through the
    app's config (``LeaseJobsConfig.notifies``), since the models import no dialect."""
    config: Any = apps.get_app_config("django_leasejobs")
    return bool(config.notifies(alias))


class _FinishListener:
    """A dedicated connection listening for finish notifications (PostgreSQL)."""

    def __init__(self, using: str, job_id: int) -> None:
        self.using = using
        self.job_id = job_id
        self.conn: Any = None

    def open(self) -> bool:
        """LISTEN now (before the next read, so no finish after it is missed); False when
        that is not possible here, and the wait polls."""
        if not _notifies(self.using):
            return False
        wrapper = connections[self.using]
        try:
            self.conn = wrapper.get_new_connection(wrapper.get_connection_params())
            self.conn.autocommit = True
            self.conn.execute(f"LISTEN {notify.FINISHED_CHANNEL}")
            self.conn.pgconn.socket  # noqa: B018 - psycopg 3, or polling
        except Exception as exc:
            logger.warning("notify.listen_failed error=%s", exc)
            self.close()
            return False
        return True

    def fileno(self) -> int:
        return int(self.conn.pgconn.socket)

    def announced(self) -> bool:
        """Whether the job's finish was announced since the last call (reads what arrived).

        A broken connection counts as announced (the row is read again) and is closed: the
        wait goes on polling.
        """
        found = False
        try:
            pgconn = self.conn.pgconn
            pgconn.consume_input()
            while (notice := pgconn.notifies()) is not None:
                if self.job_id in notify.finished_ids(notice.extra.decode()):
                    found = True
        except Exception as exc:
            logger.warning("notify.connection_lost error=%s", exc)
            self.close()
            return True
        return found

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):  # already broken
                self.conn.close()
        self.conn = None


def wait(job: Job, timeout: Any = None) -> Any:
    """Block until ``job`` finishes; refresh it and return its result (see ``Job.wait``)."""
    clock = _Clock(job, timeout)
    using = primary_of(job._state.db or job_database())  # never a replica
    if not _finished(job, using):
        clock.remaining()  # a timeout of 0 ends here, before any connection is opened
        listener = _FinishListener(using, job.pk)
        try:
            listener.open()
            while not _finished(job, using):
                if listener.conn is None:
                    time.sleep(clock.next_poll())
                else:
                    _listen(listener, clock)
        finally:
            listener.close()
    _refresh(job, using)
    return outcome(job)


def _listen(listener: _FinishListener, clock: _Clock) -> None:
    """Until the job's finish is announced or ``NOTIFIED_RECHECK`` passes (then the row is
    read again); ``TimeoutError`` at the deadline. Other jobs' finishes are not read for."""
    until = time.monotonic() + min(clock.remaining(), NOTIFIED_RECHECK)
    with selectors.DefaultSelector() as selector:  # select() fails past 1024 descriptors
        selector.register(listener.fileno(), selectors.EVENT_READ)
        while listener.conn is not None:
            pause = until - time.monotonic()
            if pause <= 0:
                break
            if selector.select(pause) and listener.announced():
                return
    clock.remaining()


async def await_result(job: Job, timeout: Any = None) -> Any:
    """``wait`` for async code: the reads run through ``sync_to_async``, the pauses are
    ``asyncio`` sleeps or waits for the listening socket, so the event loop stays free."""
    clock = _Clock(job, timeout)
    using = primary_of(job._state.db or job_database())  # never a replica
    finished = sync_to_async(_finished, thread_sensitive=True)
    if not await finished(job, using):
        clock.remaining()
        listener = _FinishListener(using, job.pk)
        try:
            await sync_to_async(listener.open, thread_sensitive=False)()
            while not await finished(job, using):
                if listener.conn is None:
                    await asyncio.sleep(clock.next_poll())
                else:
                    await _alisten(listener, clock)
        finally:
            listener.close()
    await sync_to_async(_refresh, thread_sensitive=True)(job, using)
    return outcome(job)


async def _alisten(listener: _FinishListener, clock: _Clock) -> None:
    """``_listen`` on the event loop: woken by the listening socket, never blocking it."""
    loop = asyncio.get_running_loop()
    fd = listener.fileno()
    readable = asyncio.Event()
    try:
        loop.add_reader(fd, readable.set)
    except NotImplementedError:  # an event loop without readers (Windows' proactor): poll
        listener.close()
        return
    try:
        until = time.monotonic() + min(clock.remaining(), NOTIFIED_RECHECK)
        while listener.conn is not None:
            pause = until - time.monotonic()
            if pause <= 0:
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(readable.wait(), pause)
            if readable.is_set():
                readable.clear()
                if listener.announced():
                    return
        clock.remaining()
    finally:
        loop.remove_reader(fd)
