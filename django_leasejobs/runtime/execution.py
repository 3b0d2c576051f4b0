"""Run one claimed job and write its result through the protocol.

Kept apart from the worker loop so tests, the worker and the tasks backend run a job the same
way: look the name up in the registry (importing its module only where ``registry.find``
allows), call it outside any transaction, and turn what happened into one guarded write
(:mod:`.attempt_ends`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.db import connections

from .. import protocol
from ..core import registry, task_rows
from ..core.backoff import Backoff
from ..errors import PermanentError, UnknownJobError
from ..models import Job
from ..protocol import UNREGISTERED_JOB, Failure, Outcome
from ..retries import Reschedule, Snooze, When
from . import connection_keeper, job_logs, telemetry, upgrades
from .attempt_ends import write_result
from .context import Cancellation, JobContext
from .flags import Flag

logger = logging.getLogger("django_leasejobs")


@dataclass
class Execution:
    """The result of running a job, before it is written."""

    job: Job
    context: JobContext
    ok: bool = False
    result: Any = None
    failure: Failure | None = None
    retryable: bool = True
    when: When | None = None
    """The handler's own time for its next attempt (it raised ``Retry`` or ``Snooze``)."""
    snoozed: bool = False
    """It raised ``Snooze``: the attempt is handed back uncharged (``protocol.snooze``)."""
    unknown: str = ""
    """Why this worker cannot run the row's name (not registered, not importable here): the
    attempt is handed back to wait for a worker that can (``protocol.defer``)."""
    backoff: Backoff | None = None
    """The backoff ``@job(retry_on={...})`` gives the exception raised, if it gives one."""
    task: Any = None
    """The ``django.tasks`` Task, for a row enqueued through the tasks backend."""
    task_sender: Any = None
    exception: BaseException | None = None
    """What the handler raised: ``task_finished`` is sent while a task's is handled again, as
    Django does; the test helpers raise it in the test."""
    on_start: Callable[[Execution, float | None], None] | None = None
    """Called with the handler's timeout just before the handler is: the worker's watchdog
    starts counting there (after the name was looked up, a task resolved)."""
    upgraded: protocol.Upgraded | None = None
    """The row's arguments brought to the handler's version (``@job(upgrade=)``): the success
    write stores them (``protocol.complete``), so such a success is never grouped."""

    def begin(self, timeout: float | None) -> None:
        """The handler is about to be called, with this timeout (None: none).

        The callback is dropped once called: it holds the worker's slot, which will hold this
        execution, and that cycle kept every grouped job alive until a full garbage collection.
        """
        on_start, self.on_start = self.on_start, None
        if on_start is not None:
            on_start(self, timeout)


def close_old_connections() -> None:
    """Drop broken or expired connections between jobs, as Django does between requests.

    In the worker's threads its :mod:`.connection_keeper` does it, keeping the connections
    whatever ``CONN_MAX_AGE`` says. Connections inside an atomic block (an enclosing test
    transaction, a caller's transaction) are left alone: closing them would break the caller.
    """
    keeper = connection_keeper.current()
    if keeper is not None:
        keeper.tidy()
        return
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


def interrupts_process(exc: BaseException) -> bool:
    """A ``KeyboardInterrupt`` in the main thread: someone is stopping this process (Ctrl-C).

    Passed on, as Django's own backends do. In any other thread (a worker's pool thread) it
    can only be the handler's own ``raise``, and it fails the attempt like any exception.
    """
    return isinstance(exc, KeyboardInterrupt) and (
        threading.current_thread() is threading.main_thread()
    )


def start(
    job: Job,
    worker_id: str,
    lease_lost: Flag | None = None,
    *,
    cancellation: Cancellation | None = None,
    on_start: Callable[[Execution, float | None], None] | None = None,
) -> Execution:
    """The attempt's context and an empty result, before its handler is called."""
    context = JobContext(
        job_id=job.pk,
        attempt=job.attempt,
        name=job.name,
        queue=job.queue,
        worker_id=worker_id,
        workflow_step_id=job.workflow_step_id,
        lease_lost_event=lease_lost or Flag(),
        cancellation=cancellation or Cancellation(),
    )
    return Execution(job=job, context=context, on_start=on_start)


def arguments(execution: Execution, job_function: registry.JobSpec, args: list[Any]) -> list[Any]:
    """The handler's positional arguments: its context first when it takes one."""
    return [execution.context, *args] if job_function.takes_context else list(args)


def find(job: Job) -> registry.JobSpec | UnknownJobError:
    """The row's ``@job``, its module imported if a worker may (``registry.find``); or why not."""
    try:
        return registry.find(job.name)
    except UnknownJobError as exc:
        return exc


def unregistered(execution: Execution, unknown: UnknownJobError) -> None:
    """No ``@job`` of the row's name here: nothing is called, and ``write_result`` hands the attempt
    back uncharged to wait for a worker that knows the name (``protocol.defer``), until
    ``LEASEJOBS_UNKNOWN_JOB_GRACE`` has passed since its first deferral.

    The error says why the name was not found and ends with what to do (kept whole in logs).
    """
    detail = f": {unknown.problem}" if unknown.problem else ""
    execution.unknown = f"{execution.job.name!r} is not registered here{detail}"
    execution.failure = Failure(
        f"No job is registered as {execution.job.name!r}; it was not run{detail}. {unknown.advice}",
        kind=UNREGISTERED_JOB,
        advice=unknown.advice,
    )
    execution.retryable = False


def rescheduled(execution: Execution, exc: Reschedule) -> None:
    """The handler raised ``Retry`` or ``Snooze``: its next attempt at the time it gave.

    A ``Retry`` is a failed attempt of kind ``retry requested`` (charged; dead-lettered as
    attempts exhausted on the last one); a ``Snooze`` is written by ``protocol.snooze``.
    """
    execution.exception = exc
    execution.when = exc.when
    if isinstance(exc, Snooze):
        execution.snoozed = True
        execution.failure = Failure.from_exception(exc, kind="snoozed")
    else:
        execution.failure = Failure.from_exception(exc, kind="retry requested")


def failed(execution: Execution, exc: BaseException, job_function: registry.JobSpec) -> None:
    """Record what the handler raised: ``Retry`` and ``Snooze`` reschedule it; a
    ``PermanentError``, a ``permanent=`` kind or one outside ``retry_on=`` is not retried."""
    if isinstance(exc, Reschedule):
        rescheduled(execution, exc)
        return
    execution.exception = exc
    kind = "error"
    if isinstance(exc, PermanentError) or (
        job_function.permanent and isinstance(exc, job_function.permanent)
    ):
        kind = "permanent error"
    elif job_function.retry_on is not None:
        retried, execution.backoff = job_function.retry_on.match(exc)
        if not retried:
            kind = "not in retry_on"
    if kind != "error":
        execution.retryable = False
    execution.failure = Failure.from_exception(exc, kind=kind)


def execute(
    job: Job,
    worker_id: str,
    lease_lost: Flag | None = None,
    *,
    cancellation: Cancellation | None = None,
    on_start: Callable[[Execution, float | None], None] | None = None,
) -> Execution:
    """Call the job's handler; never raises for what the handler does (but see below).

    Any exception, ``SystemExit`` included, fails the attempt with its traceback, as Django's
    own tasks backends do; a ``KeyboardInterrupt`` in the main thread is passed on, as they do
    too (``interrupts_process``). An ``async def`` handler met here (in-process helpers, eager
    mode) runs through ``async_to_sync``, so its async ORM calls use the caller's thread and
    connection; the worker runs such handlers on its event loop instead
    (:mod:`.async_execution`).
    """
    execution = start(job, worker_id, lease_lost, cancellation=cancellation, on_start=on_start)
    started = time.monotonic()
    # The span is current and the logs captured in this thread (the handler's own spans nest
    # under it, its records reach its attempt's buffer).
    with telemetry.span(job) as span, job_logs.capturing(execution):
        telemetry.began(span, execution)
        telemetry.link_parents(execution)
        try:
            _execute(execution)
        finally:
            telemetry.ended(span, execution, time.monotonic() - started)
    return execution


def _execute(execution: Execution) -> None:
    """``execute``'s work, inside the attempt's span."""
    job = execution.job
    if job.task_backend and registry.lookup(job.name) is None:
        close_old_connections()
        try:
            task_rows.handler().execute(execution)
        finally:
            close_old_connections()
        return
    job_function = find(job)
    if isinstance(job_function, UnknownJobError):
        unregistered(execution, job_function)
        return
    close_old_connections()
    prepared = upgrades.prepared(execution, job_function)  # upgraders may read the database
    if prepared is None:
        close_old_connections()
        return
    args, kwargs = prepared
    func = async_to_sync(job_function.func) if job_function.is_async else job_function.func
    # An update made in a transaction the handler opens waits (runtime/progress.py).
    execution.context.atomic_depth = len(connections[protocol.job_database()].atomic_blocks)
    try:
        execution.begin(job_function.get_timeout())
        execution.result = func(*arguments(execution, job_function, args), **kwargs)
        execution.ok = True
    except BaseException as exc:  # SystemExit too: it ends the attempt, not the worker's thread
        if interrupts_process(exc):
            raise
        failed(execution, exc, job_function)
    finally:
        close_old_connections()


def run(job: Job, worker_id: str, lease_lost: Flag | None = None) -> Outcome:
    """Execute one claimed job and write its result."""
    return write_result(execute(job, worker_id, lease_lost))
