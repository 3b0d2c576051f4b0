"""The ``@job`` decorator and the table of registered jobs.

Only functions registered here ever run: a worker looks a row's ``name`` up in this table and
never imports a name read from the database.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from . import validation
from .backoff import Backoff
from .conf import settings
from .errors import UnknownJobError

if TYPE_CHECKING:
    from .models import Job

P = ParamSpec("P")
R = TypeVar("R")

_registry: dict[str, JobFunction[Any, Any]] = {}
_lock = threading.Lock()


class JobFunction(Generic[P, R]):
    """A registered job: call it to run inline, ``.enqueue()`` to run it on a worker.

    Defaults given to ``@job`` apply to each enqueue unless the call overrides them; ``None``
    means "the ``LEASEJOBS_*`` setting at enqueue time".
    """

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        queue: str | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        lease: float | None = None,
        takes_context: bool = False,
        permanent: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.func = func
        self.name = name or f"{func.__module__}.{func.__qualname__}"
        if "<" in self.name:
            raise ValueError(
                f"@job needs a module-level function (got {self.name}); nested functions "
                "cannot be found again by name."
            )
        self.queue = validation.check_queue(queue) if queue is not None else None
        self.priority = validation.check_priority(priority)
        self.max_attempts = (
            validation.check_max_attempts(max_attempts) if max_attempts is not None else None
        )
        self.backoff = backoff
        if lease is not None and (isinstance(lease, bool) or lease <= 0):
            raise ValueError(f"lease must be a positive number of seconds, not {lease!r}.")
        self.lease = lease
        self.takes_context = takes_context
        self.permanent = tuple(permanent)
        functools.update_wrapper(self, func)

    def __repr__(self) -> str:
        return f"<job {self.name}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def get_queue(self) -> str:
        return self.queue or settings.DEFAULT_QUEUE

    def get_max_attempts(self) -> int:
        return self.max_attempts or settings.MAX_ATTEMPTS

    def get_backoff(self) -> Backoff:
        return self.backoff or Backoff.from_settings()

    def enqueue(self, *args: Any, **kwargs: Any) -> Job:
        """Persist one job in the caller's transaction and return its row.

        Options (taken out of ``kwargs``): ``run_at``, ``delay``, ``priority``, ``queue``,
        ``dedupe_key``, ``max_attempts``. Everything else is passed to the function.
        """
        from . import lifecycle

        options = {key: kwargs.pop(key) for key in lifecycle.ENQUEUE_OPTIONS if key in kwargs}
        return lifecycle.enqueue(self.name, args, kwargs, **options)

    def enqueue_many(self, items: Iterable[Any]) -> list[Job]:
        """Persist many jobs, in bulk where possible; return them in order.

        Each item is ``(args, kwargs)`` or a dict with ``args``, ``kwargs`` and enqueue options.
        """
        from . import lifecycle

        return lifecycle.enqueue_many(self.name, items)


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
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


def job(func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Register a function as a job: ``@job`` or ``@job(queue=..., max_attempts=...)``."""

    def register(f: Callable[..., Any]) -> JobFunction[Any, Any]:
        job_function: JobFunction[Any, Any] = JobFunction(f, **options)
        with _lock:
            existing = _registry.get(job_function.name)
            if existing is not None and existing.func is not f:
                _duplicates.add(job_function.name)
            _registry[job_function.name] = job_function
        return job_function

    if func is not None:
        return register(func)
    return register


_duplicates: set[str] = set()


def get(name: str) -> JobFunction[Any, Any]:
    try:
        return _registry[name]
    except KeyError:
        raise UnknownJobError(
            f"No job is registered as {name!r}. Decorate the function with @job and make sure "
            "its module is imported (jobs.py modules of installed apps are imported at start)."
        ) from None


def lookup(name: str) -> JobFunction[Any, Any] | None:
    return _registry.get(name)


def registered() -> dict[str, JobFunction[Any, Any]]:
    return dict(_registry)


def duplicate_names() -> set[str]:
    """Names registered twice by different functions (a system check reports them)."""
    return set(_duplicates)
