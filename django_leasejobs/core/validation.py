"""Checks on enqueue input, so a bad job is refused at enqueue and never fails at run time.

The options here (priority, queue, attempts, timeout, dedupe, run_at); the arguments, JSON that
must come back as given, in :mod:`.json_values`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from typing import Any

from django.conf import settings as django_settings
from django.utils import timezone

from ..errors import JobValidationError
from .conf import settings
from .json_values import check_text
from .value_rules import BUDGET_LIKE, MAX_ATTEMPTS_LIMIT, QUEUE_NAME, QUEUE_NAME_RULE, is_timeout

MIN_PRIORITY = -100
MAX_PRIORITY = 100
MAX_DEDUPE_KEY = 200
MAX_PROGRESS_MESSAGE = 500
"""The longest ``ctx.progress()`` message kept, in characters; a longer one is cut to it."""


def check_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise JobValidationError(f"priority must be an integer, not {priority!r}.")
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise JobValidationError(
            f"priority {priority} is out of range {MIN_PRIORITY}..{MAX_PRIORITY}."
        )
    return priority


def check_queue(queue: Any) -> str:
    if isinstance(queue, str) and BUDGET_LIKE.fullmatch(queue):
        raise JobValidationError(
            f"queue {queue!r} ends in ':' and digits, which `runjobworker --queues` reads as "
            "a number of threads (mail:10): name it without them (mail-10, mail_10)."
        )
    if not isinstance(queue, str) or not QUEUE_NAME.fullmatch(queue):
        raise JobValidationError(f"queue {queue!r} is not a valid queue name ({QUEUE_NAME_RULE}).")
    return queue


def undeclared_queues(names: Iterable[str]) -> list[str]:
    """The names ``LEASEJOBS_QUEUES`` does not list, sorted; none when it is unset (any goes)."""
    declared = settings.QUEUES
    return [] if declared is None else sorted(set(names) - set(declared))


def check_declared_queues(names: Iterable[str]) -> None:
    """Refuse queue names no worker is meant to serve (a typo): in an enqueue, or asked
    about by a monitor."""
    unknown = undeclared_queues(names)
    if unknown:
        raise JobValidationError(
            f"Unknown queue(s) {', '.join(unknown)}: "
            f"LEASEJOBS_QUEUES lists {', '.join(settings.QUEUES or [])}."
        )


def check_max_attempts(max_attempts: Any) -> int:
    if (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
    ):
        raise JobValidationError(
            f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}, not {max_attempts!r}."
        )
    return max_attempts


def check_timeout(timeout: Any, name: str = "timeout") -> float | None:
    """A handler's time limit: ``None`` (none) or a positive, finite number of seconds."""
    if not is_timeout(timeout):
        raise JobValidationError(
            f"{name} must be None or a positive number of seconds, not {timeout!r}."
        )
    return None if timeout is None else float(timeout)


def check_dedupe_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_DEDUPE_KEY or "\x00" in key:
        raise JobValidationError(
            f"dedupe_key must be a non-empty string of at most {MAX_DEDUPE_KEY} characters "
            f"without NUL, not {key!r}."
        )
    check_text(key, "dedupe_key")  # a lone surrogate: no driver can encode it
    return key


RUN_AT_YEARS = (1000, 9999)
"""What every database stores: MariaDB's DATETIME starts at year 1000."""


def _storable(run_at: dt.datetime) -> dt.datetime:
    """``run_at`` in UTC when aware, within ``RUN_AT_YEARS``.

    In UTC because PostgreSQL refuses a UTC offset beyond 15:59 that Python allows.
    """
    try:
        value = run_at if timezone.is_naive(run_at) else run_at.astimezone(dt.timezone.utc)
    except OverflowError:
        value = None
    if value is None or not RUN_AT_YEARS[0] <= value.year <= RUN_AT_YEARS[1]:
        raise JobValidationError(
            f"run_at must fall in the years {RUN_AT_YEARS[0]} to {RUN_AT_YEARS[1]} (UTC), "
            f"not {run_at.isoformat()}."
        )
    return value


MAX_DELAY_SECONDS = 100 * 366 * 86400
"""A longer delay is a mistake (and a much longer one overflows the date arithmetic)."""


def _seconds(delay: int | float) -> float:
    """``delay`` as a float; an integer past a float's range (``10**400``, which a JSON body
    may carry) raises ``OverflowError`` there, and is refused like any delay too long."""
    try:
        return float(delay)
    except OverflowError:
        raise JobValidationError(
            "delay must be a finite, non-negative duration of at most 100 years, "
            "not an integer that large."
        ) from None


LIVE_STATES = ("pending", "running", "failed")
ALL_STATES = (*LIVE_STATES, "succeeded", "dead", "cancelled")
ON_CONFLICT = ("ignore", "replace")
MAX_DEDUPE_PERIOD = 10 * 365 * 86400


def check_dedupe_states(states: Any) -> tuple[str, ...] | None:
    """The states whose job holds a dedupe key; they must include every live state.

    A live job always holds its key (the unique ``live_dedupe_key`` settles racing producers),
    so only finished states can be added to the default.
    """
    if states is None:
        return None
    if isinstance(states, str) or not isinstance(states, list | tuple | set | frozenset):
        raise JobValidationError(
            f"dedupe_states must be a list of job states, not {states!r} (e.g. "
            '["pending", "running", "failed", "succeeded"]).'
        )
    unknown = [s for s in states if s not in ALL_STATES]
    if unknown:
        raise JobValidationError(
            f"dedupe_states: unknown state(s) {unknown!r}; states are {', '.join(ALL_STATES)}."
        )
    missing = [s for s in LIVE_STATES if s not in states]
    if missing:
        raise JobValidationError(
            f"dedupe_states must include every live state (pending, running, failed); "
            f"{', '.join(missing)} is missing. A live job always holds its dedupe key."
        )
    return tuple(s for s in ALL_STATES if s in states)


def check_dedupe_period(period: Any) -> float | None:
    """Seconds of one dedupe window, or None (no window)."""
    if period is None:
        return None
    if isinstance(period, bool) or not isinstance(period, int | float):
        raise JobValidationError(f"dedupe_period must be a number of seconds, not {period!r}.")
    if not 1 <= period <= MAX_DEDUPE_PERIOD:
        raise JobValidationError(
            f"dedupe_period must be between 1 second and 10 years, not {period!r}."
        )
    return float(period)


def check_on_conflict(value: Any) -> str | None:
    if value is None:
        return None
    if value not in ON_CONFLICT:
        raise JobValidationError(f'on_conflict must be "ignore" or "replace", not {value!r}.')
    return str(value)


def check_run_at(run_at: Any, delay: Any) -> tuple[dt.datetime | None, float | None]:
    """Return an absolute ``run_at`` or a delay in seconds (added to the database's clock)."""
    if run_at is not None and delay is not None:
        raise JobValidationError("Give run_at or delay, not both.")
    if run_at is not None:
        if not isinstance(run_at, dt.datetime):
            raise JobValidationError(f"run_at must be a datetime, not {type(run_at).__name__}.")
        if django_settings.USE_TZ and timezone.is_naive(run_at):
            raise JobValidationError(
                "run_at is a naive datetime while USE_TZ = True; pass an aware datetime "
                "(django.utils.timezone.now() + ...)."
            )
        return _storable(run_at), None
    if delay is not None:
        if isinstance(delay, dt.timedelta):
            seconds = delay.total_seconds()
        elif isinstance(delay, int | float) and not isinstance(delay, bool):
            seconds = _seconds(delay)
        else:
            raise JobValidationError(f"delay must be seconds or a timedelta, not {delay!r}.")
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DELAY_SECONDS:
            raise JobValidationError(
                f"delay must be a finite, non-negative duration of at most 100 years, "
                f"not {delay!r}."
            )
        return None, seconds
    return None, None
