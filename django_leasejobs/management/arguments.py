"""Option parsers shared by the management commands (argparse ``type=`` callables).

A bad value raises ``ArgumentTypeError``, so argparse names the option and exits with its
usage status, and every command words the same mistake the same way.
"""

from __future__ import annotations

import argparse
import datetime as dt

from django_leasejobs.durations import parse_duration


def duration(text: str, *, bare_seconds: bool = False) -> dt.timedelta:
    """A duration (``5m``, ``1h``; a plain number of seconds too with ``bare_seconds``)."""
    try:
        return parse_duration(text, bare_seconds=bare_seconds)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def whole_number(text: str, low: int = 0, high: int | None = None) -> int:
    """A whole number from ``low`` up to ``high`` (no upper bound when ``None``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number.") from None
    if high is None and value < low:
        raise argparse.ArgumentTypeError(f"must be {low} or more, not {text!r}.")
    if high is not None and not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {value}.")
    return value
