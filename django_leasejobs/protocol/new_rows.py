"""A new job's row, before anything is written: the enqueue options checked, the arguments
validated (JSON, the handler's signature), the defaults resolved, the dedupe key and limit
keys made. :mod:`.enqueues` inserts what this returns; a workflow step, an occurrence and an
operator's replay build their rows here too.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import json_values, limits, registry, validation
from ..core.conf import settings as conf_settings
from ..core.fairness import Fairness
from ..db.dbtime import db_now
from ..errors import JobValidationError
from . import dedupe
from .base import job_database

NO_LIMITS = limits.Limits()
NO_FAIRNESS = Fairness()

ENQUEUE_OPTIONS = (
    "run_at",
    "delay",
    "priority",
    "queue",
    "dedupe_key",
    "max_attempts",
    "fair_key",
    "fair_weight",
    *dedupe.OPTIONS,
)


@dataclass(frozen=True)
class Defaults:
    """What a job gets when the caller does not say: resolved once per enqueue call."""

    queue: str
    priority: int
    max_attempts: int
    lease: float | None
    max_payload_bytes: int
    limits: limits.Limits = NO_LIMITS
    """The job's concurrency and rate limits: their keys are computed per enqueue."""
    keyed: bool = False
    """``@job(dedupe_key=...)``: every enqueue makes a dedupe key of its arguments."""
    check_arguments: Callable[[Sequence[Any], dict[str, Any]], None] | None = None
    """Refuses arguments the handler could not take; None for a ``django.tasks`` task."""
    version: int = 1
    """``@job(version=)``: the version new rows store (1 for a ``django.tasks`` task)."""
    fairness: Fairness = NO_FAIRNESS
    """The job's fair key and weight: the key is computed per enqueue."""

    @classmethod
    def resolve(cls, name: str, task_backend: str = "") -> Defaults:
        """The registered job's defaults (a ``django.tasks`` task's come from its caller)."""
        if task_backend:
            return cls(
                conf_settings.DEFAULT_QUEUE,
                0,
                conf_settings.MAX_ATTEMPTS,
                None,
                conf_settings.MAX_PAYLOAD_BYTES,
            )
        job_function = registry.get(name)
        return cls(
            job_function.get_queue(),
            job_function.priority,
            job_function.get_max_attempts(),
            job_function.lease,
            conf_settings.MAX_PAYLOAD_BYTES,
            job_function.limits,
            job_function.dedupe_key is not None,
            job_function.check_arguments,
            job_function.version,
            job_function.fairness,
        )


def check_options(options: dict[str, Any]) -> None:
    unknown = options.keys() - ENQUEUE_OPTIONS
    if unknown:
        raise JobValidationError(f"Unknown enqueue options: {', '.join(sorted(unknown))}.")


def row_values(
    name: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    run_at: dt.datetime | None = None,
    delay: Any = None,
    priority: int | None = None,
    queue: str | None = None,
    dedupe_key: str | bool | None = None,
    max_attempts: int | None = None,
    dedupe_states: Any = None,
    dedupe_period: Any = None,
    on_conflict: Any = None,
    fair_key: str | None = None,
    fair_weight: int | None = None,
    now: dt.datetime | None = None,
    task_backend: str = "",
    defaults: Defaults | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """Validate everything and return a new row's field values; raise before anything is written.

    Fields not returned keep their model defaults (``run_at`` its database default, now).
    ``task_backend`` marks a ``django.tasks`` task enqueued through that ``TASKS`` alias: its
    name is a module path, not a registered job, and its defaults come from the caller.
    ``defaults`` lets a bulk enqueue resolve them once for all its rows.

    A job's former name (``@job(aliases=)``) is stored as its registered name, with the job's
    version. ``version`` (a replay of an older row, unedited) stores the arguments at that
    version instead: they are not the handler's, so they are not bound to its signature, nor
    made into limit keys (the caller copies the old row's), and a worker upgrades them.
    """
    if not task_backend:
        name = registry.canonical(name)
    defaults = defaults or Defaults.resolve(name, task_backend)
    current = version is None or version == defaults.version
    if not current:
        defaults = dataclasses.replace(
            defaults, check_arguments=None, limits=NO_LIMITS, fairness=NO_FAIRNESS
        )
    args_list, kwargs_dict = checked_arguments(defaults, args, kwargs)
    values = call_values(
        name,
        defaults,
        run_at=run_at,
        delay=delay,
        priority=priority,
        queue=queue,
        max_attempts=max_attempts,
        now=now,
        task_backend=task_backend,
    )
    values.update(
        args=args_list,
        kwargs=kwargs_dict,
        **defaults.limits.values(args_list, kwargs_dict),
        **defaults.fairness.values(args_list, kwargs_dict, fair_key, fair_weight),
    )
    key, rule = dedupe.resolve(
        name,
        values["args"],
        values["kwargs"],
        lambda: values.get("run_at") or db_now(job_database()),
        dedupe_key=dedupe_key,
        dedupe_states=dedupe_states,
        dedupe_period=dedupe_period,
        on_conflict=on_conflict,
    )
    values["dedupe_key"] = values["live_dedupe_key"] = key
    row_version = defaults.version if version is None else version
    if row_version != 1:  # left out, the column's default: the INSERT of most jobs unchanged
        values["version"] = row_version
    if rule is not None:
        values[dedupe.RULE] = rule
    return values


def checked_arguments(
    defaults: Defaults, args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as JSON lists and dicts, refused when not JSON or when they do not fit
    the handler's signature (checked second: the binding needs a list and a dict)."""
    args_list, kwargs_dict = json_values.check_payload(
        args, kwargs, max_bytes=defaults.max_payload_bytes
    )
    if defaults.check_arguments is not None:
        defaults.check_arguments(args_list, kwargs_dict)
    return args_list, kwargs_dict


def call_values(
    name: str,
    defaults: Defaults,
    *,
    run_at: dt.datetime | None = None,
    delay: Any = None,
    priority: int | None = None,
    queue: str | None = None,
    max_attempts: int | None = None,
    now: dt.datetime | None = None,
    task_backend: str = "",
) -> dict[str, Any]:
    """The fields that do not depend on the job's arguments, validated."""
    due = _due(run_at, delay, now)
    queue = validation.check_queue(queue if queue is not None else defaults.queue)
    validation.check_declared_queues([queue])  # a queue no worker serves would wait for ever
    values: dict[str, Any] = {
        "name": name,
        "queue": queue,
        "priority": validation.check_priority(
            priority if priority is not None else defaults.priority
        ),
        "max_attempts": validation.check_max_attempts(
            max_attempts if max_attempts is not None else defaults.max_attempts
        ),
        "lease_seconds": defaults.lease,
        "task_backend": task_backend,
    }
    if due is not None:
        values["run_at"] = due
    return values


def _due(run_at: dt.datetime | None, delay: Any, now: dt.datetime | None) -> dt.datetime | None:
    """The new row's ``run_at``; None leaves the database default (its own now)."""
    when, delay_seconds = validation.check_run_at(run_at, delay)
    if when is not None:
        return when
    if delay_seconds is not None:
        return (now or db_now(job_database())) + dt.timedelta(seconds=delay_seconds)
    return now
