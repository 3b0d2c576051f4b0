"""The table of registered jobs: name to job spec, and nothing else.

Only functions registered here ever run. ``@job`` (in ``jobs``) adds to it; a worker looks a
row's ``name`` up here, and for a name not found imports that name's module only where
:mod:`.job_modules` allows (``find``), then looks again.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.apps import apps

from . import code_schedules, dedupe_keys, job_modules, limits, validation
from .backoff import Backoff
from .conf import settings
from .errors import JobValidationError, UnknownJobError

_registry: dict[str, JobSpec] = {}
_lock = threading.Lock()


class JobSpec:
    """A registered job's function and defaults.

    Defaults given to ``@job`` apply to each enqueue unless the call overrides them; ``None``
    means "the ``LEASEJOBS_*`` setting at enqueue time".
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        queue: str | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        lease: float | None = None,
        takes_context: bool = False,
        permanent: tuple[type[BaseException], ...] = (),
        timeout: float | None = None,
        api: bool = False,
        dedupe_key: bool | str | None = None,
        dedupe_states: Sequence[str] | None = None,
        dedupe_period: float | None = None,
        on_conflict: str | None = None,
        concurrency_key: limits.KeySource = None,
        concurrency_limit: int | None = None,
        rate_limit: str | None = None,
        rate_key: limits.KeySource = None,
        cron: str | None = None,
        timezone: str | None = None,
        misfire: str | None = None,
        jitter: int | None = None,
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
        self.timeout = validation.check_timeout(timeout)
        if not isinstance(api, bool):
            raise ValueError(f"api must be True or False, not {api!r}.")
        self.api = api
        """May be enqueued over HTTP (``django_leasejobs.api``), as if listed in
        ``LEASEJOBS_API_JOBS``."""
        self.is_async = inspect.iscoroutinefunction(func)
        """An ``async def`` handler: the worker runs it on its event loop, not a pool thread."""
        self.signature = dedupe_keys.parameters(func, takes_context)
        self._set_dedupe(dedupe_key, dedupe_states, dedupe_period, on_conflict)
        self.limits = limits.Limits.from_options(
            self.signature,
            self.name,
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
            rate_limit=rate_limit,
            rate_key=rate_key,
        )
        """Concurrency and rate limits: the claim enforces them from the keys stored at enqueue."""
        self.schedule = code_schedules.from_options(
            self.name,
            self.signature,
            cron_expression=cron,
            timezone=timezone,
            misfire=misfire,
            jitter=jitter,
        )
        """The schedule ``@job(cron=...)`` declares (named after the job), synced as
        ``LEASEJOBS_SCHEDULES`` entries are; None without ``cron``."""

    def _set_dedupe(
        self,
        dedupe_key: bool | str | None,
        dedupe_states: Sequence[str] | None,
        dedupe_period: float | None,
        on_conflict: str | None,
    ) -> None:
        """The dedupe window options, checked against the function's signature."""
        if dedupe_key is not None and dedupe_key is not True:
            dedupe_keys.check_template(dedupe_key, self.signature)
        self.dedupe_key = dedupe_key
        """True (a hash of the call) or a template over argument names; None: no dedupe."""
        self.dedupe_states = validation.check_dedupe_states(dedupe_states)
        self.dedupe_period = validation.check_dedupe_period(dedupe_period)
        self.on_conflict = validation.check_on_conflict(on_conflict)
        if self.dedupe_key is None and (self.dedupe_period or self.on_conflict):
            raise JobValidationError(
                "dedupe_period and on_conflict need dedupe_key (True or a template) on @job."
            )

    def __repr__(self) -> str:
        return f"<job {self.name}>"

    def get_queue(self) -> str:
        return self.queue or settings.DEFAULT_QUEUE

    def get_max_attempts(self) -> int:
        return self.max_attempts or settings.MAX_ATTEMPTS

    def get_backoff(self) -> Backoff:
        return self.backoff or Backoff.from_settings()

    def get_timeout(self) -> float | None:
        """Seconds a worker lets the handler run (``LEASEJOBS_TIMEOUT_SECONDS`` unless set),
        read when the handler starts, so a changed setting needs no migration of old rows."""
        return self.timeout if self.timeout is not None else settings.TIMEOUT_SECONDS


def add(spec: JobSpec) -> None:
    """Register ``spec`` under its name (a second function under one name is reported).

    A job registered once the app registry is ready (by the URLconf, a view, a test) is noted:
    a worker has only what its own start registered, and a system check names the late ones a
    worker could not import.
    """
    with _lock:
        existing = _registry.get(spec.name)
        if existing is not None and existing.func is not spec.func:
            _duplicates.add(spec.name)
        _registry[spec.name] = spec
        if apps.ready:
            _late.add(spec.name)
        else:
            _late.discard(spec.name)


_duplicates: set[str] = set()
_late: set[str] = set()


def unknown(name: str, problem: str = "") -> UnknownJobError:
    """The error for a name no job is registered under, with why (if known) and what to do."""
    detail = f" ({problem})" if problem else ""
    return UnknownJobError(
        f"No job is registered as {name!r}{detail}. {job_modules.JOB_ADVICE}",
        problem=problem,
        advice=job_modules.JOB_ADVICE,
    )


def get(name: str) -> JobSpec:
    """The job registered as ``name``; ``UnknownJobError`` if none (nothing is imported)."""
    try:
        return _registry[name]
    except KeyError:
        raise unknown(name) from None


def find(name: str) -> JobSpec:
    """``get``, as a worker looks a row's name up: a name not registered yet makes it import
    the name's module, only where :mod:`.job_modules` allows, and look again.

    ``UnknownJobError`` (its ``problem`` says why) when the name is still not registered.
    """
    spec = _registry.get(name)
    if spec is not None:
        return spec
    problem = job_modules.load(name)
    spec = _registry.get(name)
    if spec is not None:
        return spec
    module = name.rpartition(".")[0]
    raise unknown(name, problem or f"importing {module!r} registered no job of that name")


def lookup(name: str) -> JobSpec | None:
    return _registry.get(name)


def registered() -> dict[str, JobSpec]:
    return dict(_registry)


def any_async() -> bool:
    """Whether any registered job is ``async def`` (a worker then starts its event loop)."""
    return any(spec.is_async for spec in list(_registry.values()))


def duplicate_names() -> set[str]:
    """Names registered twice by different functions (a system check reports them)."""
    return set(_duplicates)


def registered_late() -> dict[str, JobSpec]:
    """Jobs registered after app loading (not by ``django.setup()``): a system check reports
    those a worker could not find."""
    return {name: spec for name, spec in list(_registry.items()) if name in _late}
