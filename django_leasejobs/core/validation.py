"""Checks on enqueue input, so a bad job is refused at enqueue and never fails at run time."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.conf import settings as django_settings
from django.utils import timezone

from ..errors import JobValidationError
from .conf import BUDGET_LIKE, MAX_ATTEMPTS_LIMIT, QUEUE_NAME, QUEUE_NAME_RULE, is_timeout, settings

MIN_PRIORITY = -100
MAX_PRIORITY = 100
MAX_DEDUPE_KEY = 200

COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))
"""One encoder for every payload: ``json.dumps`` with separators builds a new one per call,
and a bulk enqueue would pay for that on every row."""


MAX_JSON_DEPTH = 31
"""Lists and dicts nested deeper than this are refused, on every database: MariaDB's JSON
check accepts at most 31 levels, and encoding and decoding JSON recurse in Python, so a limit
that depended on the caller's stack would accept a value at enqueue that a worker, deeper in
its own stack, then fails to decode after its claim has committed."""


def check_json(value: Any, path: str = "args", *, exact_floats: bool = False) -> None:
    """Refuse anything that would not come back from the database exactly as given.

    ``json.dumps`` alone is not enough: it turns NaN into a token PostgreSQL rejects, int dict
    keys into strings, and lets NUL characters through (jsonb refuses ``\\u0000``). A value
    nested deeper than ``MAX_JSON_DEPTH``, or that contains itself, is refused as well (it
    would otherwise fail later: MariaDB's JSON check, or RecursionError in a worker).
    With ``exact_floats`` (job arguments, see ``check_payload``), so are the floats jsonb gives
    back changed (``_float_changes``); a handler's result keeps them, as failing a job whose
    work is done, for the type its number comes back as, would be worse.
    """
    if _json_size_bound(value, 0) >= 0:
        return
    try:
        _check_json(value, path, 0, exact_floats)
    except RecursionError:  # a caller already deep in its own stack
        raise JobValidationError(_too_deep(path)) from None


EXACT_FLOAT_LIMIT = 1e16
"""Floats of this magnitude and more are written in exponent form (``1e+16``); PostgreSQL's
jsonb keeps numbers as ``numeric`` and prints them without an exponent, so they come back as
integers. Refused in job arguments on every database, so that a job reads the same arguments
wherever it runs."""


def _float_changes(value: float) -> str | None:
    """Why jsonb would give ``value`` back changed, or None when it comes back as sent."""
    if -EXACT_FLOAT_LIMIT < value < EXACT_FLOAT_LIMIT:
        if value == 0 and math.copysign(1.0, value) < 0:
            return "PostgreSQL's jsonb gives it back as 0.0 (numeric has no negative zero)"
        return None
    return (
        "a float of 1e16 or more in magnitude, which PostgreSQL's jsonb gives back as an "
        "integer; pass an int (or the number as a string)"
    )


def _too_deep(path: str) -> str:
    return (
        f"{path} nests deeper than {MAX_JSON_DEPTH} levels or contains itself; "
        "JSON is a finite tree."
    )


MAX_INT_BITS = 10_000
"""About 3,000 digits: Python refuses to write an integer of more than 4,300 digits as text
(``sys.set_int_max_str_digits``), so a longer one would fail when the row is written."""

_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone UTF-16 surrogate (what ``os.fsdecode`` makes of badly encoded bytes): not valid
UTF-8, so PostgreSQL and MariaDB refuse the JSON that holds it (SQLite would store it)."""


def _bad_text(text: str) -> bool:
    return "\x00" in text or (not text.isascii() and _SURROGATE.search(text) is not None)


def _check_text(text: str, where: str) -> None:
    if "\x00" in text:
        raise JobValidationError(f"{where} a NUL character, which cannot be stored.")
    surrogate = None if text.isascii() else _SURROGATE.search(text)
    if surrogate is not None:
        raise JobValidationError(
            f"{where} a lone surrogate ({surrogate.group()!r}), which is not valid UTF-8 and "
            "cannot be stored; decode the bytes it came from properly."
        )


def check_text(text: str, what: str) -> str:
    """Refuse a name or label with a NUL or a lone surrogate: no database driver stores them,
    so they would fail as a server error where they are written or looked up."""
    _check_text(text, f"{what} contains")
    return text


def _json_size_bound(value: Any, depth: int) -> int:
    """At least the length of ``value``'s compact JSON if it is made of the builtin JSON types
    only (exactly ``str``, ``int``, ``float``, ``bool``, ``None``, ``list``, ``tuple``, ``dict``)
    and valid (``_check_json`` would pass it); -1 for anything else, which ``_check_json``
    then judges and explains. The common case, checked in one walk that builds no path for
    an error message and no JSON: those are needed only when a value is refused.
    """
    kind = type(value)
    if kind is str:
        # Escaped, a character takes at most 12 characters (two \uXXXX outside the BMP).
        return -1 if _bad_text(value) else 12 * len(value) + 2
    if kind is int:
        bits = value.bit_length()
        return -1 if bits > MAX_INT_BITS else bits // 3 + 3  # digits (bits x 0.302 + 1), sign
    if value is None or kind is bool:
        return 5
    if kind is float:
        # Finite, and as jsonb gives it back: not -0.0 nor 1e16 and more (_float_changes).
        # Literal bounds (EXACT_FLOAT_LIMIT): a global's lookup per float costs a little.
        if -1e16 < value < 1e16 and (value or math.copysign(1.0, value) > 0):
            return 24  # repr: "-2.2250738585072014e-308"
        return -1
    if kind is list or kind is tuple:
        if depth >= MAX_JSON_DEPTH:
            return -1
        size = 2 + len(value)  # brackets and commas
        for item in value:
            item_size = _json_size_bound(item, depth + 1)
            if item_size < 0:
                return -1
            size += item_size
        return size
    if kind is dict:
        if depth >= MAX_JSON_DEPTH:
            return -1
        size = 2 + 2 * len(value)  # braces, colons and commas
        for key, item in value.items():
            if type(key) is not str or _bad_text(key):
                return -1
            item_size = _json_size_bound(item, depth + 1)
            if item_size < 0:
                return -1
            size += 12 * len(key) + 2 + item_size
        return size
    return -1


def _check_json(value: Any, path: str, depth: int, exact_floats: bool = True) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise JobValidationError(
                f"{path} contains an integer of {value.bit_length()} bits; at most "
                f"{MAX_INT_BITS} (Python refuses to write longer ones as text)."
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JobValidationError(f"{path} contains {value!r}; JSON has no NaN or Infinity.")
        change = _float_changes(value) if exact_floats else None
        if change is not None:
            raise JobValidationError(
                f"{path} contains {value!r}: {change}. Refused on every database, so that job "
                "arguments come back exactly as given."
            )
        return
    if isinstance(value, str):
        _check_text(value, f"{path} contains")
        return
    if depth >= MAX_JSON_DEPTH and isinstance(value, list | tuple | dict):
        raise JobValidationError(_too_deep(path.partition("[")[0]))
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]", depth + 1, exact_floats)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise JobValidationError(
                    f"{path} has the key {key!r}; JSON object keys must be strings."
                )
            _check_text(key, f"{path} has a key with")
            _check_json(item, f"{path}[{key!r}]", depth + 1, exact_floats)
        return
    raise JobValidationError(
        f"{path} is a {type(value).__name__}, which is not JSON; job arguments are JSON only "
        "(pass ids or ISO strings, not objects)."
    )


def check_payload(
    args: Any, kwargs: Any, *, max_bytes: int | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """Refuse arguments that are not JSON or are over the size cap (``max_bytes``, default
    ``LEASEJOBS_MAX_PAYLOAD_BYTES``, which a bulk enqueue reads once for all its rows)."""
    # Exact list/tuple/dict first: an isinstance() against the abstract classes is the slow
    # part of checking a bulk enqueue's empty arguments.
    if type(args) not in (list, tuple) and (
        not isinstance(args, Sequence) or isinstance(args, str | bytes)
    ):
        raise JobValidationError(f"args must be a list, not {type(args).__name__}.")
    if type(kwargs) is not dict and not isinstance(kwargs, Mapping):
        raise JobValidationError(f"kwargs must be a dict, not {type(kwargs).__name__}.")
    args_list, kwargs_dict = list(args), dict(kwargs)
    cap = settings.MAX_PAYLOAD_BYTES if max_bytes is None else max_bytes
    args_size, kwargs_size = _json_size_bound(args_list, 0), _json_size_bound(kwargs_dict, 0)
    if args_size >= 0 and kwargs_size >= 0 and args_size + kwargs_size + 3 <= cap:
        return args_list, kwargs_dict  # valid, and its JSON cannot be over the cap
    check_json(args_list, "args", exact_floats=True)
    check_json(kwargs_dict, "kwargs", exact_floats=True)
    # ASCII-only (ensure_ascii): as many bytes as characters.
    size = len(COMPACT_JSON.encode([args_list, kwargs_dict]))
    if size > cap:
        raise JobValidationError(
            f"Job arguments are {size} bytes, over LEASEJOBS_MAX_PAYLOAD_BYTES ({cap}). "
            "Store large data in your own tables and pass its id."
        )
    return args_list, kwargs_dict


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
    _check_text(key, "dedupe_key contains")  # a lone surrogate: no driver can encode it
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
