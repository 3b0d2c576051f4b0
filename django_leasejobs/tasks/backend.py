"""The ``django.tasks`` backend: ``@task`` functions run on this app's queue, unchanged.

Configure it with::

    TASKS = {"default": {"BACKEND": "django_leasejobs.backends.LeaseJobsBackend"}}

A thin adapter: ``enqueue`` validates and writes a job through ``protocol`` (in the caller's
transaction) and ``get_result`` reads the job back as a ``TaskResult``. The worker runs such jobs
through ``tasks.execution``, with the same leases, retries and dead letters as ``@job`` functions.
Works with ``django.tasks`` (Django 6.0+) or, failing that, the ``django-tasks`` backport.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured

from .. import protocol
from ..core import dedupe_keys, job_modules, validation
from ..core.backoff import Backoff
from ..core.conf import settings
from ..errors import JobValidationError, TaskRefusedError
from ..models import Job, results
from ..runtime import inprocess
from . import framework as tasks_framework
from . import results as task_results

_framework = tasks_framework.get()  # ImproperlyConfigured, saying what to install, if none

InvalidTask = _framework.InvalidTask
TaskResultDoesNotExist = _framework.TaskResultDoesNotExist


class InvalidTaskArguments(InvalidTask, JobValidationError):  # type: ignore[valid-type,misc]
    """Arguments or options refused at enqueue; nothing was written.

    Both the framework's ``InvalidTask`` and this app's ``JobValidationError`` (a ``ValueError``),
    so either family of ``except`` clause catches it.
    """


class UnsupportedTaskArgument(InvalidTaskArguments, TypeError):
    """An argument of a type JSON has no form for (Django's "Unsupported type"); nothing written.

    A ``TypeError`` too, as Django's own backends raise (``normalize_json`` in ``TaskResult``).
    """


class TaskArgumentsError(InvalidTaskArguments, TypeError):
    """Arguments the task's function could not be called with (missing, unexpected, too
    many): refused at enqueue, as a ``TypeError`` too; nothing was written."""


_signature = functools.lru_cache(maxsize=1024)(dedupe_keys.parameters)
"""The signature callers enqueue against (the context left out), kept per task function."""


def _check_arguments(task: Any, args: Any, kwargs: Any) -> None:
    signature = _signature(task.func, bool(getattr(task, "takes_context", False)))
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TaskArgumentsError(
            f"Task {task.module_path!r} cannot take these arguments: {exc}."
        ) from None


def _backoff(value: Any, where: str) -> Backoff | None:
    if value is None or isinstance(value, Backoff):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"base", "cap", "jitter"}
        if unknown:
            raise ValueError(f"{where} has unknown keys {sorted(unknown)} (base, cap, jitter).")
        return Backoff(**value)
    raise ValueError(f"{where} must be a Backoff or a dict of base/cap/jitter, not {value!r}.")


def _normalized(args: Any, kwargs: Any) -> tuple[Any, Any]:
    """The arguments as Django's ``TaskResult`` keeps them (tuples as lists, bytes decoded).

    A type JSON cannot hold raises Django's own ``TypeError`` ("Unsupported type"), as an
    enqueue on Django's backends does. A value that contains itself is left for
    ``protocol``'s check, which names it.
    """
    normalize = _framework.normalize_json
    try:
        return normalize(args), normalize(kwargs)
    except TypeError as exc:
        raise UnsupportedTaskArgument(f"Task arguments are not JSON: {exc}") from None
    except RecursionError:
        return args, kwargs
    except ValueError as exc:  # bytes that are not UTF-8
        raise InvalidTaskArguments(f"Task arguments are not JSON: {exc}") from None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LeaseTask(_framework.Task):  # type: ignore[name-defined]
    """A ``django.tasks`` Task with this app's options; the backend's ``task_class``.

    Set them on the decorator (``@task(max_attempts=3)``) or per call with
    ``.using(max_attempts=..., backoff=..., dedupe_key=...)``. ``None`` means the backend's
    ``OPTIONS``, then the ``LEASEJOBS_*`` settings.
    """

    max_attempts: int | None = None
    backoff: Backoff | None = None
    dedupe_key: str | None = None
    timeout: float | None = None

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: Any = None,
        backend: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        dedupe_key: str | None = None,
        timeout: float | None = None,
    ) -> LeaseTask:
        """Django's ``using()``, plus ``max_attempts``, ``backoff``, ``dedupe_key``, ``timeout``."""
        # Called through the class: zero-argument super() does not work in a slots dataclass.
        task = _framework.Task.using(
            self, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend
        )
        changes: dict[str, Any] = {}
        if max_attempts is not None:
            changes["max_attempts"] = max_attempts
        if backoff is not None:
            changes["backoff"] = backoff
        if dedupe_key is not None:
            changes["dedupe_key"] = dedupe_key
        if timeout is not None:
            changes["timeout"] = timeout
        return dataclasses.replace(task, **changes) if changes else task


class LeaseJobsBackend(_framework.BaseTaskBackend):  # type: ignore[name-defined]
    """Runs ``django.tasks`` tasks as jobs: leases, retries with backoff, dead letters, replay.

    ``OPTIONS``: ``max_attempts`` (default ``LEASEJOBS_MAX_ATTEMPTS``), ``backoff`` (a
    ``Backoff`` or a dict of ``base``, ``cap``, ``jitter``; default the ``LEASEJOBS_BACKOFF_*``
    settings) and ``timeout`` (seconds a task may run; default ``LEASEJOBS_TIMEOUT_SECONDS``).
    ``QUEUES`` lists the queue names tasks may use, as for any Django backend.
    """

    task_class = LeaseTask
    supports_defer = True
    supports_priority = True
    supports_get_result = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = dict(self.options)
        unknown = set(options) - {"max_attempts", "backoff", "timeout"}
        if unknown:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown keys {sorted(unknown)}; "
                "this backend takes max_attempts, backoff and timeout."
            )
        try:
            self.default_max_attempts = (
                validation.check_max_attempts(options["max_attempts"])
                if options.get("max_attempts") is not None
                else None
            )
            self.default_backoff = _backoff(
                options.get("backoff"), f"TASKS[{alias!r}]['OPTIONS']['backoff']"
            )
            self.default_timeout = validation.check_timeout(
                options.get("timeout"), "OPTIONS['timeout']"
            )
        except ValueError as exc:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]: {exc}") from None
        for queue in self.queues:
            try:
                validation.check_queue(queue)
            except JobValidationError as exc:
                raise ImproperlyConfigured(f"TASKS[{alias!r}]['QUEUES']: {exc}") from None

    def validate_task(self, task: Any) -> None:
        """Django's checks (module-level function, priority, queue, run_after) plus ours.

        Where the task's module lives is not checked here, where the task is defined: a
        library's tasks (imported by its app's ``ready()``) live outside the app packages, and
        refusing them stopped the project from starting. A task defined while the project
        loads is trusted (``task_results.defined``); any other is checked at enqueue.
        """
        super().validate_task(task)
        try:
            validation.check_queue(task.queue_name)
            if len(task.module_path) > Job._meta.get_field("name").max_length:  # type: ignore[operator]
                raise JobValidationError(
                    f"The task path {task.module_path!r} is too long to store "
                    f"(over {Job._meta.get_field('name').max_length} characters)."
                )
            if getattr(task, "max_attempts", None) is not None:
                validation.check_max_attempts(task.max_attempts)
            _backoff(getattr(task, "backoff", None), "backoff")
            validation.check_dedupe_key(getattr(task, "dedupe_key", None))
            validation.check_timeout(getattr(task, "timeout", None))
        except ValueError as exc:
            raise InvalidTask(str(exc)) from None
        task_results.defined(task)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Write the job in the caller's transaction and return its ``TaskResult``.

        A task a worker would refuse (defined after the project loaded, outside the installed
        apps and ``LEASEJOBS_TASK_MODULES``) is refused here, before anything is written.
        """
        self.validate_task(task)
        refused = task_results.refusal(task.module_path)
        if refused:
            raise InvalidTask(
                f"A worker would not run this task. {refused} {job_modules.TASK_ADVICE}"
            )
        args, kwargs = _normalized(args, kwargs)
        _check_arguments(task, args, kwargs)
        max_attempts = getattr(task, "max_attempts", None) or self.default_max_attempts
        try:
            job = protocol.enqueue_task(
                task.module_path,
                args,
                kwargs,
                task_backend=self.alias,
                queue=task.queue_name,
                priority=task.priority,
                run_at=task.run_after,
                max_attempts=max_attempts,
                dedupe_key=getattr(task, "dedupe_key", None),
            )
        except JobValidationError as exc:
            raise InvalidTaskArguments(str(exc)) from None
        result = task_results.build(job, task)
        (tasks_framework.of(task) or _framework).task_enqueued.send(type(self), task_result=result)
        inprocess.enqueued(job)  # LEASEJOBS_EAGER (tests): run it at commit
        return result

    def get_result(self, result_id: str) -> Any:
        """The task's current state, read from its job; ``TaskResultDoesNotExist`` if none."""
        job = self._job(result_id)
        try:
            task = task_results.task_for(job)
        except TaskRefusedError as exc:
            raise TaskResultDoesNotExist(f"Task result {result_id!r}: {exc}") from None
        return task_results.build(job, task)

    async def aget_result(self, result_id: str) -> Any:
        return await sync_to_async(self.get_result, thread_sensitive=True)(result_id)

    def _job(self, result_id: Any) -> Job:
        """The job behind ``result_id``, read as ``fn.get_result()`` reads one (``results``)."""
        try:
            return results.fetch(str(result_id), task_backend=self.alias)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(f"No task result {result_id!r}.") from None
        except Job.DoesNotExist:
            raise TaskResultDoesNotExist(
                f"No task result {result_id!r} on the {self.alias!r} tasks backend."
            ) from None

    def task_timeout(self, task: Any) -> float | None:
        """Seconds ``task`` may run: its own, else ``OPTIONS``, else the setting (None: no
        limit). Read when the task starts, so changed options apply to rows already queued."""
        own = getattr(task, "timeout", None)
        if own is not None:
            return float(own)
        if self.default_timeout is not None:
            return self.default_timeout
        return settings.TIMEOUT_SECONDS

    def task_backoff(self, task: Any) -> Backoff | None:
        """The retry policy of ``task``: its own, else the backend's ``OPTIONS``."""
        return _backoff(getattr(task, "backoff", None), "backoff") or self.default_backoff
