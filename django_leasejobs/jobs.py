"""The public face: ``@job`` registers a function, ``fn.enqueue()`` persists a job.

A ``JobFunction`` is its registered spec (``registry.JobSpec``) that can also be called inline
and enqueued. The protocol is imported when an enqueue runs, not when this module loads, so
``from django_leasejobs import job`` works before Django's apps are ready.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from . import registry
from .backoff import Backoff

if TYPE_CHECKING:
    from .models import Job

P = ParamSpec("P")
R = TypeVar("R")


class JobFunction(registry.JobSpec, Generic[P, R]):
    """A registered job: call it to run inline, ``.enqueue()`` to run it on a worker."""

    func: Callable[P, R]

    def __init__(self, func: Callable[P, R], **options: Any) -> None:
        super().__init__(func, **options)
        functools.update_wrapper(self, func)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def enqueue(self, *args: Any, **kwargs: Any) -> Job:
        """Persist one job in the caller's transaction and return its row.

        Options (taken out of ``kwargs``): ``run_at``, ``delay``, ``priority``, ``queue``,
        ``dedupe_key``, ``max_attempts``, ``dedupe_states``, ``dedupe_period``,
        ``on_conflict``. Everything else is passed to the function.
        """
        from . import protocol
        from .runtime import inprocess

        options = {key: kwargs.pop(key) for key in protocol.ENQUEUE_OPTIONS if key in kwargs}
        job = protocol.enqueue(self.name, args, kwargs, **options)
        inprocess.enqueued(job)  # LEASEJOBS_EAGER (tests): run it at commit
        return job

    def enqueue_many(self, items: Iterable[Any]) -> list[Job]:
        """Persist many jobs, in bulk where possible; return them in order.

        Each item is ``(args, kwargs)`` or a dict with ``args``, ``kwargs`` and enqueue options.
        """
        from . import protocol
        from .runtime import inprocess

        jobs = protocol.enqueue_many(self.name, items)
        inprocess.enqueued(jobs)
        return jobs


@overload
def job(func: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job(
    func: None = None,
    /,
    *,
    name: str | None = ...,
    queue: str | None = ...,
    priority: int = ...,
    max_attempts: int | None = ...,
    backoff: Backoff | None = ...,
    lease: float | None = ...,
    takes_context: bool = ...,
    permanent: tuple[type[BaseException], ...] = ...,
    timeout: float | None = ...,
    api: bool = ...,
    dedupe_key: bool | str | None = ...,
    dedupe_states: Sequence[str] | None = ...,
    dedupe_period: float | None = ...,
    on_conflict: str | None = ...,
    concurrency_key: str | Callable[..., Any] | None = ...,
    concurrency_limit: int | None = ...,
    rate_limit: str | None = ...,
    rate_key: str | Callable[..., Any] | None = ...,
    cron: str | None = ...,
    timezone: str | None = ...,
    misfire: str | None = ...,
    jitter: int | None = ...,
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


def job(func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Register a function as a job: ``@job`` or ``@job(queue=..., max_attempts=...)``.

    Options (the site's reference lists them from here, one per line):

    ``name``: the registered name; default ``module.function``. Rows keep it: rename with care.
    ``queue``: the queue its jobs go to; default ``LEASEJOBS_DEFAULT_QUEUE``.
    ``priority``: higher runs first, -100 to 100.
    ``max_attempts``: attempts before the job is dead-lettered; default
    ``LEASEJOBS_MAX_ATTEMPTS``.
    ``backoff``: a ``Backoff(base=, cap=, jitter=)`` for its retries; default the
    ``LEASEJOBS_BACKOFF_*`` settings.
    ``lease``: lease seconds for its attempts; default the worker's ``--lease``.
    ``takes_context``: pass the running attempt's ``JobContext`` as the first argument.
    ``permanent``: exception classes that dead-letter the job at once, without a retry.
    ``timeout``: a worker ends the attempt as failed (kind ``timeout``, retried by the
    backoff rules) when the handler runs longer than this many seconds, and sets
    ``ctx.cancelled`` (docs/worker.md#timeouts).
    ``api``: may be enqueued over the HTTP API, as if listed in ``LEASEJOBS_API_JOBS``.
    ``dedupe_key``: ``True`` (a hash of the call's arguments) or a template over argument
    names (``"user:{user_id}"``): a live job with the same key is returned, not duplicated.
    ``dedupe_states``: finished states whose jobs still hold the key (docs/flow-control.md).
    ``dedupe_period``: seconds a key stays held after its job was created.
    ``on_conflict``: ``"ignore"`` (return the existing job) or ``"replace"`` (debounce: the
    waiting job takes the new arguments and ``run_at``).
    ``concurrency_key``: a template or function of the arguments; at most
    ``concurrency_limit`` jobs with the same key run at once, over every worker.
    ``concurrency_limit``: the most running jobs per ``concurrency_key``.
    ``rate_limit``: starts per period, ``"100/m"`` (``s``, ``m`` or ``h``), per
    ``rate_key`` (or per job name without one).
    ``rate_key``: a template or function of the arguments that the rate limit counts by.
    ``cron``: a cron expression: declares a schedule named after the job, whose occurrences
    call it with no arguments, synced as ``LEASEJOBS_SCHEDULES`` entries are
    (docs/recurrence.md).
    ``timezone``: the IANA timezone the ``cron`` expression is read in; default ``"UTC"``.
    ``misfire``: what the scheduler does with occurrences missed while none ran: ``"latest"``
    (the default), ``"all"`` or ``"skip"``.
    ``jitter``: seconds of random delay added to each occurrence's start; default 0.
    """

    def register(f: Callable[..., Any]) -> JobFunction[Any, Any]:
        job_function: JobFunction[Any, Any] = JobFunction(f, **options)
        registry.add(job_function)
        return job_function

    if func is not None:
        return register(func)
    return register
