"""Option parsers shared by the management commands (argparse ``type=`` callables).

A bad value raises ``ArgumentTypeError``, so argparse names the option and exits with its
usage status, and every command words the same mistake the same way.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.management.base import CommandError

from django_leasejobs.core import row_ids
from django_leasejobs.core.durations import parse_duration

Parsed = TypeVar("Parsed")

MAX_BATCH = 10_000
"""Rows a batch of a pruning or backfill command may take: enough to be quick, few enough to
keep each transaction's locks short."""


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


def batch_size(text: str) -> int:
    """``--batch N``: rows per transaction, 1 to ``MAX_BATCH``."""
    return whole_number(text, low=1, high=MAX_BATCH)


def batch(value: Any) -> int:
    """``--batch`` as ``call_command`` may pass it too (a keyword skips argparse's ``type``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise CommandError(f"--batch must be between 1 and {MAX_BATCH}, not {value!r}.")
    return value


def given(
    value: Any,
    parse: Callable[[str], Parsed],
    option: str,
    parsed: type | tuple[type, ...],
    *,
    returncode: int = 1,
) -> Parsed | None:
    """An option as ``call_command`` may pass it too: a keyword skips argparse's ``type``, so
    a value that is not ``parsed`` yet is read by ``parse`` here, a bad one refused naming
    ``option``. ``None`` (not given) stays ``None``."""
    if value is None or (isinstance(value, parsed) and not isinstance(value, bool)):
        return value  # type: ignore[return-value]
    try:
        return parse(str(value))
    except argparse.ArgumentTypeError as exc:
        raise CommandError(f"{option}: {exc}", returncode=returncode) from None


def job_id(text: str) -> int:
    """A row id from 1 (ASCII digits, within the key column's range), or argparse's own
    error naming the bad value: ``+5``, a superscript or an id past 64 bits never reaches the
    database."""
    value = row_ids.row_id(text)
    if not value:
        raise ValueError(text)
    return value


job_id.__name__ = "job id"  # argparse says "invalid job id value: 'x'"
