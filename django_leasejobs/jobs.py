"""The public face: ``@job`` registers a function, ``fn.enqueue()`` persists a job.

A ``JobFunction`` is its registered spec (``registry.JobSpec``) that can also be called inline
and enqueued; the rules of its enqueue options are in :mod:`.core.enqueue_options`. The
protocol is imported when an enqueue runs, not when this module loads, so
``from django_leasejobs import job`` works before Django's apps are ready.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    TypedDict,
    TypeVar,
    overload,
)

from asgiref.sync import sync_to_async

from .core import enqueue_options, registry
from .core.backoff import Backoff
from .core.enqueue_options import EnqueueOptions
from .core.signatures import Signature

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .models import Job
    from .runtime.context import JobContext

P = ParamSpec("P")
R = TypeVar("R")
_Job = TypeVar("_Job", bound="JobFunction[Any, Any]")


class JobFunction(registry.JobSpec, Generic[P, R]):
    """A registered job: call it to run inline, ``.enqueue()`` to run it on a worker.

    ``.using(**options)`` returns a copy of it with enqueue options set (the same registered
    job, not a new registration), whose ``.enqueue()`` passes every keyword to the handler.
    """

    func: Callable[..., R]
    _options: EnqueueOptions | None = None
    """Set on a ``.using()`` copy (even to ``{}``): its options; None on the registered job."""

    def __init__(self, func: Callable[..., R], **options: Any) -> None:
        super().__init__(func, **options)
        functools.update_wrapper(self, func)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        if self._options is None:
            return super().__repr__()
        options = ", ".join(f"{key}={value!r}" for key, value in self._options.items())
        return f"<job {self.name} using({options})>"

    def using(self: _Job, **options: Unpack[EnqueueOptions]) -> _Job:
        """A copy whose enqueues take these options, and pass every keyword to the handler.

        ``fn.using(priority=5).enqueue(order_id=1)``. Calls chain, a later one's options over
        an earlier one's (``run_at`` and ``delay`` replace each other); ``None`` resets an
        option to the job's default. The options are checked here: an unknown name is a
        ``TypeError``, a bad value a ``JobValidationError``. The options:

        - ``run_at``: an aware datetime the job is due at (naive when ``USE_TZ = False``).
        - ``delay``: seconds or a ``timedelta``, added to the database clock at each enqueue.
        - ``priority``: higher runs first, -100 to 100.
        - ``queue``: the queue the job goes to.
        - ``dedupe_key``: a string, or ``True`` (a hash of the call's arguments): a live job
          holding the same key is returned instead of a new one (docs/enqueue.md#dedupe).
        - ``max_attempts``: attempts before the job is dead-lettered.
        - ``dedupe_states``: finished states whose jobs still hold the key.
        - ``dedupe_period``: seconds a key stays held after its job was created.
        - ``on_conflict``: ``"ignore"`` or ``"replace"`` (debounce), with a dedupe key.
        - ``fair_key``: the job's fair key, over ``@job(fair_key=)``'s: it interleaves with
          other keys' jobs of its queue and priority (docs/fairness.md).
        - ``fair_weight``: the key's share against a weight-1 key's, 1 to 100 (with a key).
        """
        merged = enqueue_options.merged(self, self._options, dict(options))
        configured = copy.copy(self)
        configured._options = merged  # type: ignore[assignment]
        return configured

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Persist one job in the caller's transaction and return its row.

        On a ``.using()`` copy every keyword goes to the handler. On the job itself, keywords
        named like an enqueue option (``priority``, ``delay``, ...) are taken as options,
        unless the handler has a parameter of that name: then this raises ``TypeError``, and
        ``.using()`` says which is meant. Arguments that the handler could not be called with
        (missing, unexpected, too many) raise ``TypeError`` (``JobArgumentsError``) here,
        before anything is written.
        """
        from . import protocol
        from .runtime import inprocess

        options: dict[str, Any] = dict(self._options or {})
        if self._options is None:
            options = enqueue_options.options_in(self, kwargs)
        job = protocol.enqueue(self.name, args, kwargs, **options)
        inprocess.enqueued(job)  # LEASEJOBS_EAGER (tests): run it at commit
        return job

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature of this job with these arguments, for a workflow step
        (docs/workflows.md): its parents' result is bound as its first argument when the step
        is released. Keywords are taken as ``enqueue()`` takes them (on a ``.using()`` copy,
        all go to the handler)."""
        return self._signature(args, kwargs, takes_result=True)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """``s()`` for a step that ignores its parents' results (immutable arguments)."""
        return self._signature(args, kwargs, takes_result=False)

    def _signature(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], *, takes_result: bool
    ) -> Signature:
        kwargs = dict(kwargs)
        options: dict[str, Any] = dict(self._options or {})
        if self._options is None:
            options = enqueue_options.options_in(self, kwargs)
        return Signature(self, tuple(args), kwargs, options, takes_result)

    def get_result(self, job_id: int | str) -> Job:
        """This function's job ``job_id``, read now: its ``status``, ``result``,
        ``last_error`` and ``replayed_by``. ``Job.DoesNotExist`` for an unknown id, and for the
        id of another function's job. Read from the database its jobs are written to (its
        queue's, ``LEASEJOBS_QUEUE_DATABASES``), or the one a reference names (``"jobs2:42"``).
        """
        from .models.databases import queue_database
        from .models.results import fetch

        return fetch(job_id, name=self.name, database=queue_database(self.get_queue()))

    async def aget_result(self, job_id: int | str) -> Job:
        """``get_result()`` for async code."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.get_result, thread_sensitive=True)(job_id)

    def enqueue_many(self, items: Iterable[Any]) -> list[Job]:
        """Persist many jobs, in bulk where possible; return them in order.

        Each item is ``(args, kwargs)`` or a dict with ``args``, ``kwargs`` and enqueue options.
        On a ``.using()`` copy its options apply to every item, and an item's own options
        override them for that item. Arguments an item's handler could not take raise
        ``TypeError`` naming the item's index; nothing is written.
        """
        from . import protocol
        from .runtime import inprocess

        if self._options:
            options = self._options
            items = [enqueue_options.with_options(item, options) for item in items]
        jobs = protocol.enqueue_many(self.name, items)
        inprocess.enqueued(jobs)
        return jobs

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """``enqueue`` from async code, as Django's ``Task.aenqueue`` is: the sync enqueue in
        ``sync_to_async(thread_sensitive=True)``, so it commits at once (autocommit) unless
        that thread is inside an atomic block of your own."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(*args, **kwargs)

    async def aenqueue_many(self, items: Iterable[Any]) -> list[Job]:
        """``enqueue_many`` from async code, with ``aenqueue``'s transaction semantics."""
        return await sync_to_async(self.enqueue_many, thread_sensitive=True)(items)


class ContextJobFunction(JobFunction[P, R]):
    """A job declared with ``takes_context=True``: called inline with a context first, and
    enqueued with the other arguments only (the worker passes the context)."""

    def __call__(  # type: ignore[override]
        self, context: JobContext, /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        return self.func(context, *args, **kwargs)


class JobOptions(TypedDict, total=False):
    """``@job``'s options but ``takes_context``, for the type checker (a test keeps them in
    step with ``registry.JobSpec``; the reference describes them)."""

    name: str | None
    queue: str | None
    priority: int
    max_attempts: int | None
    backoff: Backoff | None
    lease: float | None
    permanent: tuple[type[BaseException], ...] | None
    retry_on: registry.RetryOnOption
    timeout: float | None
    api: bool
    dedupe_key: bool | str | None
    dedupe_states: Sequence[str] | None
    dedupe_period: float | None
    on_conflict: str | None
    concurrency_key: str | Callable[..., Any] | None
    concurrency_limit: int | None
    rate_limit: str | None
    rate_key: str | Callable[..., Any] | None
    fair_key: str | Callable[..., Any] | None
    fair_weight: int | None
    cron: str | None
    timezone: str | None
    misfire: str | None
    jitter: int | None
    version: int
    upgrade: Mapping[int, Callable[[list[Any], dict[str, Any]], Any]] | None
    aliases: Sequence[str] | None


# The overloads type ``fn.enqueue`` from the handler: ``(*P.args, **P.kwargs)``, the
# context a worker passes first left out (``Concatenate[JobContext, P]``).
@overload
def job(func: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job(
    func: None = None,
    /,
    *,
    takes_context: Literal[True],
    **options: Unpack[JobOptions],
) -> Callable[[Callable[Concatenate[JobContext, P], R]], ContextJobFunction[P, R]]: ...


@overload
def job(
    func: None = None,
    /,
    *,
    takes_context: Literal[False] = ...,
    **options: Unpack[JobOptions],
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


@overload
def job(
    func: None = None,
    /,
    *,
    takes_context: bool,
    **options: Unpack[JobOptions],
) -> Callable[[Callable[..., R]], JobFunction[..., R]]: ...


def job(func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Register a function as a job: ``@job`` or ``@job(queue=..., max_attempts=...)``.

    Options (the site's reference lists them from here, one per line):

    ``name``: the registered name; default ``module.function``. Rows keep it: a renamed job
    lists its former name in ``aliases``.
    ``queue``: the queue its jobs go to; default ``LEASEJOBS_DEFAULT_QUEUE``.
    ``priority``: higher runs first, -100 to 100.
    ``max_attempts``: attempts before the job is dead-lettered; default
    ``LEASEJOBS_MAX_ATTEMPTS``.
    ``backoff``: a ``Backoff(base=, cap=, jitter=)`` for its retries; default the
    ``LEASEJOBS_BACKOFF_*`` settings.
    ``lease``: lease seconds for its attempts; default the worker's ``--lease``.
    ``takes_context``: pass the running attempt's ``JobContext`` as the first argument.
    ``permanent``: exception classes that dead-letter the job at once, without a retry.
    ``retry_on``: the opposite of ``permanent`` (give one or the other): only these exception
    classes (and their subclasses) are retried, anything else dead-letters the job at once;
    a dict gives each its own ``Backoff`` (``None``: the job's), docs/retries.md.
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
    ``fair_key``: a template or function of the arguments: within a queue and a priority,
    jobs of different keys interleave in the claim order instead of queueing behind one
    key's backlog (docs/fairness.md).
    ``fair_weight``: the key's share against a weight-1 key's while both have jobs waiting,
    1 to 100; default 1.
    ``cron``: a cron expression: declares a schedule named after the job, whose occurrences
    call it with no arguments, synced as ``LEASEJOBS_SCHEDULES`` entries are
    (docs/recurrence.md).
    ``timezone``: the IANA timezone the ``cron`` expression is read in; default ``"UTC"``.
    ``misfire``: what the scheduler does with occurrences missed while none ran: ``"latest"``
    (the default), ``"all"`` or ``"skip"``.
    ``jitter``: seconds of random delay added to each occurrence's start; default 0.
    ``version``: the version of the arguments the handler takes, an int from 1 (the default);
    each row stores the version it was enqueued at (docs/deploying-changes.md).
    ``upgrade``: a dict of version to function ``(args, kwargs) -> (args, kwargs)``:
    ``upgrade[1]`` turns version-1 arguments into version 2's; a worker runs the chain from a
    row's version to ``version`` before the call, and stores the result when the job succeeds.
    ``aliases``: former names of the job: rows, schedules, replays and dedupe keys under them
    reach this job (docs/deploying-changes.md#renaming-a-job).
    """

    def register(f: Callable[..., Any]) -> JobFunction[Any, Any]:
        kind = ContextJobFunction if options.get("takes_context") else JobFunction
        job_function: JobFunction[Any, Any] = kind(f, **options)
        registry.add(job_function)
        return job_function

    if func is not None:
        return register(func)
    return register
