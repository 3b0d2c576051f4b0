"""JSON and text that come back from every database exactly as they were given.

Job arguments, a handler's result and the names an operator types are stored by PostgreSQL,
MariaDB, MySQL and SQLite, each refusing or changing some values the others keep (NaN, a NUL,
a lone surrogate, a float of 1e16, deep nesting). The checks here refuse those values at the
write, on every database alike, so a job never fails later for what it was given: job
arguments at enqueue (``check_payload``), results at completion (``check_json``), names and
labels anywhere (``check_text``). The other enqueue options are checked in :mod:`.validation`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import JobValidationError
from .conf import settings

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
