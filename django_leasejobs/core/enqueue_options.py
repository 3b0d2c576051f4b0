"""One enqueue's options, apart from the handler's arguments: their names, checks and merging.

``fn.using(**options)`` checks and merges them, a plain ``fn.enqueue(...)`` takes them out of
its keywords, and ``fn.enqueue_many`` lays a ``.using()`` copy's options under each item's own:
the rules of all three are here, so :mod:`django_leasejobs.jobs` reads as the face it is.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from ..errors import JobValidationError
from . import fairness, registry, validation


class EnqueueOptions(TypedDict, total=False):
    """What ``fn.using(...)`` takes: one enqueue's options, apart from the handler's arguments.

    ``None`` for any of them means the job's own default (``@job``, then the settings).
    """

    run_at: dt.datetime | None
    delay: float | dt.timedelta | None
    priority: int | None
    queue: str | None
    dedupe_key: str | Literal[True] | None
    max_attempts: int | None
    dedupe_states: Sequence[str] | None
    dedupe_period: float | None
    on_conflict: Literal["ignore", "replace"] | None
    fair_key: str | None
    fair_weight: int | None


OPTION_NAMES = frozenset(EnqueueOptions.__optional_keys__)
"""The enqueue options (``protocol.ENQUEUE_OPTIONS``; a test keeps the two the same)."""

OPTION_CHECKS: dict[str, Callable[[Any], Any]] = {
    "priority": validation.check_priority,
    "queue": validation.check_queue,
    "max_attempts": validation.check_max_attempts,
    "dedupe_key": lambda key: key is True or validation.check_dedupe_key(key),
    "dedupe_states": validation.check_dedupe_states,
    "dedupe_period": validation.check_dedupe_period,
    "on_conflict": validation.check_on_conflict,
    "run_at": lambda run_at: validation.check_run_at(run_at, None),
    "delay": lambda delay: validation.check_run_at(None, delay),
    "fair_key": fairness.check_key,
    "fair_weight": fairness.check_weight,
}
TIMING = ("run_at", "delay")
"""The two options that say when a job is due: either replaces the other."""


def option_parameters(spec: registry.JobSpec) -> list[str]:
    """The handler's parameters named like an enqueue option, which only ``.using()`` sets.

    Positional-only parameters cannot be passed by keyword, so they are never ambiguous.
    """
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        name
        for name, parameter in spec.signature.parameters.items()
        if parameter.kind in keyword and name in OPTION_NAMES
    ]


def short_name(spec: registry.JobSpec) -> str:
    """The handler's own name, as a caller writes it in ``name.using(...)``."""
    return spec.func.__name__


def merged(
    spec: registry.JobSpec, current: Mapping[str, Any] | None, given: dict[str, Any]
) -> dict[str, Any]:
    """The ``given`` options, checked, over the ``current`` ones (``fn.using(**given)``).

    An unknown name is a ``TypeError``, a bad value a ``JobValidationError``.
    """
    unknown = sorted(given.keys() - OPTION_NAMES)
    if unknown:
        raise TypeError(
            f"{short_name(spec)}.using() got unknown option(s) {', '.join(unknown)}; "
            f"the options are {', '.join(EnqueueOptions.__annotations__)}. The handler's own "
            f"arguments go to .enqueue(): {short_name(spec)}.using(...).enqueue(...)."
        )
    for key, value in given.items():
        if value is not None:
            OPTION_CHECKS[key](value)
    if given.get("run_at") is not None and given.get("delay") is not None:
        raise JobValidationError("Give run_at or delay, not both.")
    options: dict[str, Any] = dict(current or {})
    for key in TIMING:
        if key in given:  # one timing replaces the other
            options.pop(TIMING[1 - TIMING.index(key)], None)
    options.update(given)
    return options


def options_in(spec: registry.JobSpec, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the enqueue options out of a plain ``enqueue()``'s keywords."""
    named = OPTION_NAMES & kwargs.keys()
    if not named:
        return {}
    ambiguous = sorted(named & set(option_parameters(spec)))
    if ambiguous:
        name, short = ambiguous[0], short_name(spec)
        raise TypeError(
            f"Job {spec.name!r} has a parameter named {name!r}, which is also an enqueue "
            f"option, so {short}.enqueue(..., {name}=...) is ambiguous. Set the option "
            f"with {short}.using({name}=...).enqueue(...); pass the argument with "
            f"{short}.using().enqueue(..., {name}=...)."
        )
    return {key: kwargs.pop(key) for key in named}


def with_options(item: Any, options: Mapping[str, Any]) -> Any:
    """An ``enqueue_many`` item with a ``.using()`` copy's ``options`` under its own."""
    if isinstance(item, tuple | list) and len(item) == 2:
        return {"args": item[0], "kwargs": item[1], **options}
    if isinstance(item, dict):
        own = item
        if any(key in own for key in TIMING):  # the item's timing replaces the copy's
            under = {k: v for k, v in options.items() if k not in TIMING}
        else:
            under = dict(options)
        return {**under, **own}
    return item  # refused by the protocol, which says why
