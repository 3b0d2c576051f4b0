"""``django.tasks`` results read from job rows: the status mapping, errors, workers, the task.

Shared by the backend (``get_result``) and by execution (the ``TaskResult`` a running task and
the signals see), so both describe a job the same way.
"""

from __future__ import annotations

import re
from typing import Any

from django.apps import apps
from django.utils.module_loading import import_string

from ..core import error_history, job_modules
from ..errors import TaskNotImportedError, TaskRefusedError
from ..models import Job, Status
from ..models.results import reference
from . import framework as tasks_framework

STATUS = {
    Status.PENDING: "READY",
    Status.FAILED: "READY",  # a failed attempt waiting for its retry is ready to run again
    Status.RUNNING: "RUNNING",
    Status.SUCCEEDED: "SUCCESSFUL",
    Status.DEAD: "FAILED",
    Status.CANCELLED: "FAILED",
}
"""Our six states onto Django's four: only succeeded, dead and cancelled are finished."""

LEASE_EXPIRED_CLASS = "django_leasejobs.errors.LeaseExpiredError"
TIMEOUT_CLASS = "builtins.TimeoutError"
"""An attempt the worker ended at its timeout: Python's own ``TimeoutError``."""
OTHER_ERROR_CLASS = "django_leasejobs.errors.LeaseJobsError"
_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
"""Matched whole (``fullmatch``): with ``$``, a path ending in a newline would pass."""


def exception_path(exc: BaseException) -> str:
    """``module.QualName`` of an exception, as Django's ``TaskError`` stores it."""
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


def defined(task: Any) -> None:
    """Note a task the backend validated while the project loaded (apps not ready yet).

    A task defined by ``django.setup()`` (its app's ``ready()`` imported it: Wagtail's search
    app imports ``modelsearch.tasks``) is trusted wherever its module lives: the worker's own
    start defines it too, and resolving it imports nothing new.
    """
    if not apps.ready:
        _defined_at_start.add(task.module_path)


_defined_at_start: set[str] = set()


def refusal(path: str) -> str | None:
    """Why a worker may not resolve ``path``; ``None`` when it may.

    A task defined while the project loaded may; any other path only inside an installed
    app's package or ``LEASEJOBS_TASK_MODULES`` (:mod:`..job_modules`), before anything is
    imported. Callers add what to do (``job_modules.TASK_ADVICE``).
    """
    if path in _defined_at_start:
        return None
    refused = job_modules.refusal(path)
    if refused is None:
        return None
    return f"Task path {path!r}: {refused}, and the task was not defined while the project loaded."


def resolve(path: str) -> Any:
    """The ``Task`` instance at ``path``; ``TaskRefusedError`` for anything else.

    This is the one place a name read from a row is imported, and only for rows the tasks
    backend marked that ``refusal`` allows: whatever the path names, nothing but a ``Task``
    instance is accepted.
    """
    tasks_framework.get()
    advice = job_modules.TASK_ADVICE
    refused = refusal(path)
    if refused:
        raise TaskRefusedError(f"{refused} It was not imported. {advice}", advice=advice)
    try:
        found = import_string(path)
    except ImportError as exc:
        raise TaskNotImportedError(
            f"Task path {path!r} cannot be imported: {exc}. {advice}", advice=advice
        ) from None
    if tasks_framework.of(found) is None:
        raise TaskRefusedError(
            f"{path!r} is a {type(found).__name__}, not a django.tasks Task; it was not run. "
            f"{advice}",
            advice=advice,
        )
    return found


def task_for(job: Job) -> Any:
    """The job's task, with the queue, priority and backend the job was enqueued with."""
    return resolve(job.name).using(
        priority=job.priority, queue_name=job.queue, backend=job.task_backend
    )


def worker_ids(job: Job) -> list[str]:
    """One worker id per attempt (Django's ``attempts`` is the length of this list).

    Failed attempts name their worker in the error history; the running attempt is the lease
    owner, the successful one ``finished_by``. An attempt released unspent at a worker's
    shutdown, or one of those a long history dropped (``error_history``), has no record: "".
    """
    by_attempt = {
        entry.get("attempt"): entry.get("worker", "")
        for entry in error_history.attempts(job.errors)
    }
    ids = []
    for attempt in range(1, job.attempt + 1):
        worker = by_attempt.get(attempt)
        if worker is None and attempt == job.attempt:
            worker = job.finished_by if job.status == Status.SUCCEEDED else job.lease_owner
        ids.append(worker or "")
    return ids


def task_errors(job: Job, framework: tasks_framework.Framework) -> list[Any]:
    """The job's error history as ``TaskError`` objects, oldest first: the attempts it kept
    (the first and the last), not the count of those it dropped between them."""
    errors = []
    for entry in error_history.attempts(job.errors):
        text = entry.get("error", "")
        head = text.partition(":")[0].strip()
        if entry.get("kind") == "lease expired":
            path = LEASE_EXPIRED_CLASS
        elif entry.get("kind") == "timeout":
            path = TIMEOUT_CLASS
        elif _CLASS_PATH.fullmatch(head):
            path = head
        else:
            path = OTHER_ERROR_CLASS
        errors.append(
            framework.TaskError(exception_class_path=path, traceback=entry.get("traceback") or text)
        )
    return errors


def build(job: Job, task: Any) -> Any:
    """A ``TaskResult`` describing ``job`` now."""
    framework = tasks_framework.of(task) or tasks_framework.get()
    result = framework.TaskResult(
        task=task,
        id=reference(job),
        status=framework.TaskResultStatus[STATUS[Status(job.status)]],
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=job.args,
        kwargs=job.kwargs,
        backend=job.task_backend,
        errors=task_errors(job, framework),
        worker_ids=worker_ids(job),
    )
    if job.status == Status.SUCCEEDED:
        # TaskResult is frozen; Django's own backends set the return value the same way.
        object.__setattr__(result, "_return_value", job.result)
    return result
