"""Durations typed by operators: ``7d``, ``12h``, ``30m``, ``90s``, ``1h30m``.

One parser for every command option and query parameter that takes a duration, so that a typo
is refused with the same clear message everywhere instead of being read as something else.
A bare number is accepted only where the option says it is seconds: for pruning, ``7`` could
mean seven days or seven seconds, and guessing wrong deletes a week of history.
"""

from __future__ import annotations

import datetime as dt
import math
import re

UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?[wdhms])+")
EXAMPLES = "7d, 12h, 30m, 90s or 1h30m"


def parse_duration(text: str | float | dt.timedelta, *, bare_seconds: bool = False) -> dt.timedelta:
    """Read a duration; raise ``ValueError`` with a message an operator can act on."""
    if isinstance(text, dt.timedelta):
        seconds = text.total_seconds()
    elif isinstance(text, int | float) and not isinstance(text, bool):
        if not bare_seconds:
            raise ValueError(f"{text!r} has no unit; write a duration like {EXAMPLES}.")
        seconds = float(text)
    elif isinstance(text, str):
        seconds = _seconds(text.strip().lower(), bare_seconds)
    else:
        raise ValueError(f"{text!r} is not a duration; write one like {EXAMPLES}.")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"A duration must be zero or more, not {text!r}.")
    try:
        return dt.timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"The duration {text!r} is too long.") from None


def parse_ages(value: object, keys: tuple[str, ...]) -> dict[str, dt.timedelta]:
    """Read ``{key: duration}`` (a retention setting): positive ages; a ``None`` value or a
    missing key means "no age". ``ValueError`` messages start with what follows the setting's
    name (``['dead']: ...`` or `` has unknown key(s) ...``) so the caller can prefix it."""
    if not isinstance(value, dict):
        raise ValueError(
            f' must be a dict of state -> age, like {{"succeeded": "7d", "dead": "30d"}}, '
            f"not {value!r}."
        )
    unknown = sorted(repr(key) for key in value if key not in keys)
    if unknown:
        raise ValueError(
            f" has unknown key(s) {', '.join(unknown)}: only finished states are pruned "
            f"({', '.join(keys)})."
        )
    ages: dict[str, dt.timedelta] = {}
    for key, text in value.items():
        if text is None:
            continue
        try:
            age = parse_duration(text)
        except ValueError as exc:
            raise ValueError(f"[{key!r}]: {exc}") from None
        if age <= dt.timedelta(0):
            raise ValueError(
                f"[{key!r}] must be a positive age ({EXAMPLES}), not {text!r}: a zero age "
                "would delete jobs as they finish."
            )
        ages[key] = age
    return ages


def _seconds(text: str, bare_seconds: bool) -> float:
    if not text:
        raise ValueError(f"An empty duration; write one like {EXAMPLES}.")
    if text.startswith("-"):
        raise ValueError(f"A duration must be zero or more, not {text!r}.")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        if bare_seconds:
            return float(text)
        raise ValueError(f"{text!r} has no unit; write a duration like {EXAMPLES}.")
    if not _WHOLE.fullmatch(text):
        raise ValueError(
            f"{text!r} is not a duration; write one like {EXAMPLES} "
            "(units: w weeks, d days, h hours, m minutes, s seconds)."
        )
    return sum(float(number) * UNITS[unit] for number, unit in _PART.findall(text))


def format_age(seconds: float) -> str:
    """A short human reading of a number of seconds: ``45s``, ``2m05s``, ``3h10m``, ``2d04h``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def iso(value: dt.datetime | None) -> str | None:
    """A time as ISO 8601 in UTC with ``Z``, as the API and ``jobapitoken`` print it."""
    if value is None:
        return None
    return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
