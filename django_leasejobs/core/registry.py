"""The table of registered jobs: name to job spec, and nothing else.

Only functions registered here ever run. ``@job`` (in ``jobs``) adds to it; a worker looks a
row's ``name`` up here, and for a name not found imports that name's module only where
:mod:`.job_modules` allows (``find``), then looks again. A name a job lists in
``@job(aliases=)`` (a former name) finds that job: every lookup resolves it.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.apps import apps

from ..errors import JobArgumentsError, JobValidationError, UnknownJobError
from ..retries import RetryOn
from . import code_schedules, dedupe_keys, fairness, job_modules, limits, validation, versions
from .backoff import Backoff
from .conf import settings

RetryOnOption = (
    type[BaseException]
    | Sequence[type[BaseException]]
    | Mapping[type[BaseException], Backoff | None]
    | None
)
"""``retry_on=``: exception classes, or a dict of exception class to ``Backoff`` or None."""

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
        permanent: tuple[type[BaseException], ...] | None = None,
        retry_on: (
            type[BaseException]
            | Sequence[type[BaseException]]
            | Mapping[type[BaseException], Backoff | None]
            | None
        ) = None,
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
        fair_key: limits.KeySource = None,
        fair_weight: int | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        misfire: str | None = None,
        jitter: int | None = None,
        version: int = 1,
        upgrade: Mapping[int, versions.Upgrader] | None = None,
        aliases: Sequence[str] | None = None,
    ) -> None:
        self.func = func
        self.name = name or f"{func.__module__}.{func.__qualname__}"
        if "<" in self.name:
            raise ValueError(
                f"@job needs a module-level function (got {self.name}); nested functions "
                "cannot be found again by name."
            )
        self.version = versions.check_version(version)
        """The version of the arguments the handler takes; rows store it at enqueue."""
        self.upgrade = versions.check_upgrades(self.name, self.version, upgrade)
        """Version to upgrader: ``upgrade[1]`` turns version-1 arguments into version 2."""
        self.aliases = versions.check_aliases(self.name, aliases)
        """Former names: rows under them run on this job (``lookup`` resolves them)."""
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
        if permanent is not None and retry_on is not None:
            raise TypeError(
                "@job takes permanent= (what is not retried) or retry_on= (what is retried), "
                "not both."
            )
        self.permanent = tuple(permanent or ())
        self.retry_on = None if retry_on is None else RetryOn(retry_on)
        """Only these exceptions are retried (with their own backoff, if given); None: all."""
        self.timeout = validation.check_timeout(timeout)
        if not isinstance(api, bool):
            raise ValueError(f"api must be True or False, not {api!r}.")
        self.api = api
        """May be enqueued over HTTP (``django_leasejobs.api``), as if listed in
        ``LEASEJOBS_API_JOBS``."""
        self.is_async = inspect.iscoroutinefunction(func)
        """An ``async def`` handler: the worker runs it on its event loop, not a pool thread."""
        self.signature = dedupe_keys.parameters(func, takes_context)
        self._fits = ArgumentCheck(self.signature)
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
        self.fairness = fairness.Fairness.from_options(
            self.signature, self.name, fair_key=fair_key, fair_weight=fair_weight
        )
        """The fair key and weight: each enqueue's jobs take their key's places in line."""
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

    def check_arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Refuse arguments the handler could not be called with (``JobArgumentsError``).

        Bound as a call binds them, without the context a worker passes first: a missing
        argument, an unexpected keyword or one too many is refused at enqueue, not by every
        attempt. ``*args`` and ``**kwargs`` parameters take anything.
        """
        if self._fits(args, kwargs):
            return
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            keyword = "keyword" in str(exc) or "multiple values" in str(exc)
            raise JobArgumentsError(
                f"Job {self.name!r} cannot take these arguments: {exc} "
                f"(its signature: {self.func.__name__}{_unannotated(self.signature)}).",
                field="kwargs" if keyword else "args",
            ) from None

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


class ArgumentCheck:
    """Whether a call's arguments bind to a signature: ``Signature.bind``'s verdict, in a
    fraction of its time (a bulk enqueue asks once per row). ``False`` is then asked of
    ``bind`` itself, for its message; a test holds the two to the same answers."""

    def __init__(self, signature: inspect.Signature) -> None:
        kinds = inspect.Parameter
        params = list(signature.parameters.values())
        self.positional = tuple(
            p.name for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        )
        self.keywords = frozenset(
            p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)
        )
        self.required = tuple(
            p.name
            for p in params
            if p.default is p.empty and p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)
        )
        self.var_args = any(p.kind is kinds.VAR_POSITIONAL for p in params)
        self.var_kwargs = any(p.kind is kinds.VAR_KEYWORD for p in params)
        # Without keywords, a call fits when it fills every required positional parameter
        # (none is keyword-only) and no more than there are.
        self.most = math.inf if self.var_args else len(self.positional)
        self.least = (
            math.inf
            if any(name not in self.positional for name in self.required)
            else max((self.positional.index(name) + 1 for name in self.required), default=0)
        )

    def __call__(self, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        count = len(args)
        if count > self.most:
            return False
        if not kwargs:
            return count >= self.least
        taken = self.positional[:count]
        for key in kwargs:
            if key in self.keywords:
                if key in taken:
                    return False  # given twice
            elif not self.var_kwargs:
                return False
        for name in self.required:
            if name not in taken and not (name in kwargs and name in self.keywords):
                return False
        return True


def _unannotated(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` without annotations, as an error message shows it."""
    return signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty,
    )


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
    """The job registered as ``name`` (or holding it as an alias); ``UnknownJobError`` if none
    (nothing is imported)."""
    spec = lookup(name)
    if spec is None:
        raise unknown(name)
    return spec


def find(name: str) -> JobSpec:
    """``get``, as a worker looks a row's name up: a name not registered yet makes it import
    the name's module, only where :mod:`.job_modules` allows, and look again.

    ``UnknownJobError`` (its ``problem`` says why) when the name is still not registered.
    """
    spec = lookup(name)
    if spec is not None:
        return spec
    problem = job_modules.load(name)
    spec = lookup(name)
    if spec is not None:
        return spec
    module = name.rpartition(".")[0]
    raise unknown(name, problem or f"importing {module!r} registered no job of that name")


def lookup(name: str) -> JobSpec | None:
    """The job registered as ``name``, else the one that lists it in ``@job(aliases=)``.

    A registered name wins over an alias (a system check, ``leasejobs.E014``, refuses both).
    Aliases are read from the registered specs themselves, so there is no second table to keep
    in step; the scan runs only for a name that is not registered.
    """
    spec = _registry.get(name)
    if spec is not None:
        return spec
    for candidate in list(_registry.values()):
        if name in candidate.aliases:
            return candidate
    return None


def canonical(name: str) -> str:
    """The registered name ``name`` stands for: itself, or the job listing it as an alias."""
    spec = lookup(name)
    return spec.name if spec is not None else name


def names_of(name: str) -> tuple[str, ...]:
    """Every name a row of this job may carry: its registered name, then its aliases (just
    ``name`` for one no job is registered as)."""
    spec = lookup(name)
    return (name,) if spec is None else (spec.name, *spec.aliases)


def runnable() -> dict[str, int]:
    """Each name this process can run, aliases included, to the newest version it runs."""
    names: dict[str, int] = {}
    for spec in list(_registry.values()):
        for alias in spec.aliases:
            names.setdefault(alias, spec.version)
        names[spec.name] = spec.version
    return names


def alias_conflicts() -> dict[str, list[str]]:
    """Aliases that are also a registered name, or that two jobs list: the alias to the jobs
    that claim it (the registered name first, if it is one)."""
    claims: dict[str, list[str]] = {}
    for spec in list(_registry.values()):
        for alias in spec.aliases:
            claims.setdefault(alias, []).append(spec.name)
    return {
        alias: ([alias, *owners] if alias in _registry else owners)
        for alias, owners in sorted(claims.items())
        if alias in _registry or len(owners) > 1
    }


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
