"""Run one claimed job whose handler is ``async def``, on the worker's event loop.

The counterpart of :func:`.execution.execute` for coroutines: same context, same failure
rules, same :class:`.execution.Execution` for :func:`.attempt_ends.write_result` or the grouped
completions. What differs is what must never happen on an event loop:

* No database access here. Django refuses sync ORM calls in a thread that runs an event loop
  (``SynchronousOnlyOperation``); a handler uses the async ORM (``aget``, ``acreate``, ...),
  which Django runs through ``sync_to_async`` on asgiref's one shared thread, one call at a
  time, on that thread's own connection. :func:`tidy_connections` applies the worker's
  connection rules in that thread (the worker calls it between jobs, see
  :mod:`.async_runner`); the loop thread itself never holds a connection.
* Nothing a handler raises escapes: asyncio re-raises ``KeyboardInterrupt`` and ``SystemExit``
  out of the loop itself, which would end the loop thread with every job on it still running.
  Here they fail the attempt like any error.
* Cancelling the handler's task (a timeout, a cancel request, shutdown) ends the attempt as
  failed with kind ``cancelled``; the write that follows is fenced like any other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from asgiref.sync import sync_to_async

from ..core import registry, task_rows
from ..errors import UnknownJobError
from ..models import Job
from ..protocol import Failure
from . import execution, job_logs, telemetry, upgrades
from .connection_keeper import ConnectionKeeper
from .context import Cancellation
from .execution import Execution
from .flags import Flag

CANCELLED = "cancelled"
"""The error kind of an attempt whose async handler was cancelled by the worker."""


def is_async(job: Job) -> bool:
    """Whether the job's handler is ``async def`` (a ``@job``, or a ``django.tasks`` task).

    A row that names nothing runnable is not async: the sync path records why it did not run.
    """
    if job.task_backend and registry.lookup(job.name) is None:
        return task_rows.handler().is_async(job)
    job_function = execution.find(job)  # on the claim loop: imports the module if allowed
    return not isinstance(job_function, UnknownJobError) and job_function.is_async


def possible() -> bool:
    """Whether this process can meet an async handler: an async ``@job`` is registered, or the
    tasks backend is configured (any of its rows may name an ``async def`` task)."""
    return registry.any_async() or task_rows.handler().backend_configured()


async def execute(
    job: Job,
    worker_id: str,
    lease_lost: Flag,
    *,
    cancellation: Cancellation | None = None,
    on_start: Callable[[Execution, float | None], None] | None = None,
) -> Execution:
    """Await the job's handler; never raises (see the module docstring)."""
    result = execution.start(
        job, worker_id, lease_lost, cancellation=cancellation, on_start=on_start
    )
    started = time.monotonic()
    # The span is current and the logs captured in this task (runtime/job_logs.py).
    with telemetry.span(job) as span, job_logs.capturing(result):
        telemetry.began(span, result)
        try:
            await _execute(result)
        finally:
            telemetry.ended(span, result, time.monotonic() - started)
    return result


async def _execute(result: Execution) -> None:
    """``execute``'s work, inside the attempt's span."""
    job = result.job
    job_function = registry.lookup(job.name)
    try:
        if job_function is None and job.task_backend:
            await task_rows.handler().aexecute(result)
            return
        if job_function is None:  # ``is_async`` found it; it can only have gone since
            execution.unregistered(result, registry.unknown(job.name))
            return
        if telemetry.step_to_link(result) is not None:  # in the try: a cancel ends the attempt
            await telemetry.alink_parents(result)
        prepared = upgrades.prepared(result, job_function)  # no database here: plain code
        if prepared is None:
            return
        args, kwargs = prepared
        result.begin(job_function.get_timeout())
        call = job_function.func(*execution.arguments(result, job_function, args), **kwargs)
        result.result = await call
        result.ok = True
    except asyncio.CancelledError as exc:
        uncancel()
        cancelled(result, exc)
    except BaseException as exc:  # KeyboardInterrupt, SystemExit: the attempt, not the loop
        if job_function is None:
            result.exception = exc
            result.failure = Failure.from_exception(exc)
        else:
            execution.failed(result, exc, job_function)


def cancelled(result: Execution, exc: BaseException) -> None:
    """Record a cancelled attempt: failed with kind ``cancelled``, retried by the backoff rules.

    ``exception`` stays empty: cancelling is the worker's doing, not the handler's error, so
    the in-process helpers have nothing of the handler's to raise.
    """
    detail = Failure.from_exception(exc)
    result.ok = False
    result.failure = Failure("The worker cancelled the handler.", detail.traceback, kind=CANCELLED)


def interrupted(job: Job, worker_id: str, lease_lost: Flag, exc: BaseException) -> Execution:
    """The result of an attempt stopped before its handler ran (cancelled while it waited for
    the worker's async limit) or by an error of the worker's own: failed, and retried."""
    result = execution.start(job, worker_id, lease_lost)
    if isinstance(exc, asyncio.CancelledError):
        cancelled(result, exc)
    else:
        result.failure = Failure.from_exception(exc)
    return result


def uncancel() -> None:
    """Take back the cancellation once handled, so later awaits in this task run normally."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def tidy_connections(keeper: ConnectionKeeper) -> None:
    """The worker's tidy (:mod:`.connection_keeper`) in the thread that runs the async ORM's calls.

    That thread (asgiref's shared one for ``thread_sensitive`` calls) owns the connection async
    handlers use; a broken one is dropped there, a sound one kept whatever ``CONN_MAX_AGE`` says.
    """
    await sync_to_async(keeper.tidy, thread_sensitive=True)()


async def close_connections() -> None:
    """Close that thread's connections when the worker stops."""
    from django.db import connections

    await sync_to_async(connections.close_all, thread_sensitive=True)()
