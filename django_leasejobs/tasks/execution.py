"""Running a ``django.tasks`` task from a job row that the tasks backend marked.

Called by the worker's ``execution`` module for rows with a ``task_backend`` and no registered
``@job`` of that name. The path is resolved with ``import_string`` only in ``results`` (a task
defined while the project loaded, or one inside the installed apps or
``LEASEJOBS_TASK_MODULES``), and anything but a ``Task`` instance is refused (dead-lettered,
never called). Signals follow
Django's meaning: ``task_started`` on every attempt, ``task_finished`` once, when the job is final.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import threading
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from .. import protocol
from ..core.backoff import Backoff
from ..core.conf import settings
from ..errors import PermanentError, TaskNotImportedError, TaskRefusedError
from ..models import Job
from ..protocol import Failure, Outcome
from ..retries import Reschedule, Snooze
from . import framework as tasks_framework
from . import results as task_results

if TYPE_CHECKING:
    from ..runtime.execution import Execution

logger = logging.getLogger("django_leasejobs")

_MAIN = threading.main_thread()

BACKEND_PATHS = frozenset(
    {
        "django_leasejobs.backends.LeaseJobsBackend",
        "django_leasejobs.tasks.backend.LeaseJobsBackend",
    }
)
"""Where ``TASKS`` finds this app's backend (the re-export, and the class itself)."""


def _send(signal: Any, sender: Any, task_result: Any) -> None:
    """Send a tasks signal; a receiver's error is logged, never allowed to stop the worker."""
    for receiver, response in signal.send_robust(sender, task_result=task_result):
        if isinstance(response, Exception):
            logger.error(
                "task.signal_error id=%s receiver=%r error=%r", task_result.id, receiver, response
            )


async def _asend(signal: Any, sender: Any, task_result: Any) -> None:
    """``_send`` from the event loop: sync receivers run in a thread, none blocks the loop."""
    for receiver, response in await signal.asend_robust(sender, task_result=task_result):
        if isinstance(response, Exception):
            logger.error(
                "task.signal_error id=%s receiver=%r error=%r", task_result.id, receiver, response
            )


def _failure(exc: BaseException, kind: str = "error") -> Failure:
    """The attempt's error, named by the exception's full class path (as ``TaskError`` wants)."""
    error = f"{task_results.exception_path(exc)}: {exc}"  # bounded where it is stored
    return dataclasses.replace(Failure.from_exception(exc, kind=kind), error=error)


def _normalized(framework: tasks_framework.Framework, value: Any) -> Any:
    """The return value as Django keeps it; Django's "Unsupported type" ``TypeError`` if not JSON.

    Raised inside the task's ``try``, so the error records Django's exception class, message
    and traceback (rather than an unstorable-value error from ``protocol.complete``).
    """
    try:
        return framework.normalize_json(value)
    except TypeError as exc:
        raise TypeError(f"Unstorable return value: {exc}") from exc
    except RecursionError:
        return value  # a value that contains itself: protocol.complete names it


def _prepare(execution: Execution) -> tuple[Any, tasks_framework.Framework, Any] | None:
    """Resolve the row's task: (task, its framework, the running ``TaskResult``), or ``None``
    with the attempt's failure filled in. Building the ``TaskResult`` may load fields the claim
    left deferred (the error history): from an event loop, call it through ``sync_to_async``."""
    job = execution.job
    try:
        task = task_results.task_for(job)
    except TaskNotImportedError as exc:
        # Perhaps a newer release's task: the job waits for a worker that can import it.
        execution.unknown = f"task {job.name!r} cannot be imported here"
        execution.failure = Failure(str(exc), kind="not a task", advice=exc.advice)
        execution.retryable = False
        return None
    except TaskRefusedError as exc:
        execution.failure = Failure(str(exc), kind="not a task", advice=exc.advice)
        execution.retryable = False
        return None
    except Exception as exc:
        # A worker without the framework, a TASKS alias or queue no longer configured: perhaps
        # only this worker is misconfigured, so the attempt is retried within its budget.
        execution.failure = Failure(f"The task cannot run on this worker: {exc}", kind="error")
        return None
    framework = tasks_framework.of(task) or tasks_framework.get()
    execution.task = task
    execution.task_sender = type(task.get_backend())
    return task, framework, task_results.build(job, task)


def _arguments(task: Any, framework: tasks_framework.Framework, running: Any, job: Job) -> list:
    args = list(job.args)
    if task.takes_context:
        # Django's TaskContext.attempt is len(worker_ids): our attempt, the fencing token.
        args.insert(0, framework.TaskContext(task_result=running))
    return args


def _call_failed(execution: Execution, exc: BaseException, returned: bool) -> None:
    execution.exception = exc
    if isinstance(exc, Reschedule) and not returned:  # a task's Retry and Snooze, as a job's
        snoozed = isinstance(exc, Snooze)
        execution.failure = _failure(exc, kind="snoozed" if snoozed else "retry requested")
        execution.when, execution.snoozed = exc.when, snoozed
        return
    permanent = isinstance(exc, PermanentError)
    execution.failure = _failure(exc, kind="permanent error" if permanent else "error")
    # A value that is not JSON would be returned again: no retry, as for a native job.
    execution.retryable = not (permanent or returned)


def execute(execution: Execution) -> None:
    """Resolve and call the task; fill in ``execution`` (never raises for what the task does)."""
    prepared = _prepare(execution)
    if prepared is None:
        return
    task, framework, running = prepared
    _send(framework.task_started, execution.task_sender, running)
    returned = False
    try:
        # An async task runs through async_to_sync here (in-process helpers, or a worker that
        # could not tell it was async); the worker's event loop awaits it (``aexecute``).
        execution.begin(timeout(task))
        value = task.call(
            *_arguments(task, framework, running, execution.job), **execution.job.kwargs
        )
        returned = True
        execution.result = _normalized(framework, value)
    except BaseException as exc:  # SystemExit too, as on Django's backends
        if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is _MAIN:
            raise  # as Django's backends do: someone is stopping this process
        _call_failed(execution, exc, returned)
        return
    execution.ok = True


def timeout(task: Any) -> float | None:
    """Seconds the task may run: its own, else its backend's ``OPTIONS``, else the setting."""
    policy = getattr(task.get_backend(), "task_timeout", None)
    return policy(task) if policy else settings.TIMEOUT_SECONDS


async def aexecute(execution: Execution) -> None:
    """``execute`` on the worker's event loop: an ``async def`` task is awaited in place.

    The task is resolved in asgiref's sync thread (it may read the row's deferred fields);
    ``task_started`` goes out through ``asend_robust`` (sync receivers in a thread, as Django
    runs them from async code). Cancelling the awaiting task (a timeout, a cancel request)
    raises ``CancelledError`` out of here for the caller to record.
    """
    prepared = await sync_to_async(_prepare, thread_sensitive=True)(execution)
    if prepared is None:
        return
    task, framework, running = prepared
    await _asend(framework.task_started, execution.task_sender, running)
    returned = False
    try:
        execution.begin(timeout(task))
        value = await task.acall(
            *_arguments(task, framework, running, execution.job), **execution.job.kwargs
        )
        returned = True
        execution.result = _normalized(framework, value)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # KeyboardInterrupt too: it must not end the event loop
        _call_failed(execution, exc, returned)
        return
    execution.ok = True


def is_async(job: Job) -> bool:
    """Whether the row's task is an ``async def`` (False when it does not resolve: the sync
    path then records why)."""
    try:
        task = task_results.task_for(job)
    except Exception:
        return False
    return inspect.iscoroutinefunction(task.func)


def backend_configured() -> bool:
    """Whether a ``TASKS`` alias here is this app's backend (or a subclass): its rows may name
    async tasks. Matched by class path, so that nothing imports the backend for this."""
    frameworks = tasks_framework.installed()
    if not frameworks:
        return False
    configured = frameworks[0].task_backends.settings
    for alias, entry in configured.items():
        path = entry.get("BACKEND", "") if isinstance(entry, dict) else ""
        if path in BACKEND_PATHS:
            return True
        try:
            backend_class = type(frameworks[0].task_backends[alias])
        except Exception:  # a misconfigured alias: Django reports it where it is used
            continue
        if any(f"{c.__module__}.{c.__qualname__}" in BACKEND_PATHS for c in backend_class.__mro__):
            return True
    return False


def backoff(execution: Execution) -> Backoff | None:
    """The task's retry policy, else its backend's ``OPTIONS``, else the settings (``None``)."""
    if execution.task is None:
        return None
    policy = getattr(execution.task.get_backend(), "task_backoff", None)
    return policy(execution.task) if policy else None


def finished(execution: Execution, outcome: Outcome) -> None:
    """Send ``task_finished`` when the job reached a final state (succeeded, dead, cancelled)."""
    if execution.task is None or outcome not in (
        Outcome.SUCCEEDED,
        Outcome.DEAD,
        Outcome.CANCELLED,
    ):
        return
    job = Job.objects.using(protocol.job_database()).filter(pk=execution.job.pk).first()
    if job is None:
        return
    framework = tasks_framework.of(execution.task) or tasks_framework.get()
    result = task_results.build(job, execution.task)
    if execution.exception is None:
        _send(framework.task_finished, execution.task_sender, result)
        return
    # Django sends task_finished for a failed task inside its ``except`` block, and its own
    # receiver logs the failure with ``sys.exc_info()``: handle the task's exception again.
    try:
        raise execution.exception
    except BaseException:
        _send(framework.task_finished, execution.task_sender, result)


def recovered(outcomes: dict[int, Outcome], sender: Any = None) -> None:
    """Send ``task_finished`` for tasks that lease recovery dead-lettered.

    ``protocol.recover_expired()`` runs no task code, so a task whose last worker died would
    end FAILED without a signal. A worker calls this with what recovery returned; rows that are
    not tasks (or no longer resolve to one) are skipped.
    """
    dead = [job_id for job_id, outcome in outcomes.items() if outcome == Outcome.DEAD]
    if not dead:
        return
    for job in (
        Job.objects.using(protocol.job_database()).filter(pk__in=dead).exclude(task_backend="")
    ):
        try:
            task = task_results.task_for(job)
        except Exception as exc:
            logger.warning("task.finished_skipped id=%s error=%r", job.pk, exc)
            continue
        framework = tasks_framework.of(task) or tasks_framework.get()
        _send(
            framework.task_finished,
            sender or type(task.get_backend()),
            task_results.build(job, task),
        )
