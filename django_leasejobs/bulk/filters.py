"""A bulk action's filter: the job list's own filters, read from JSON or the command line.

The HTTP API, the command and Python callers give the same keys, checked here once, so each
face words a mistake the same way (``FilterError`` names the key at fault). The admin does not
come through here: it acts on its changelist's own filtered set.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings
from django.db.models import QuerySet
from django.utils import timezone

from ..core import registry
from ..models import Job, Status
from ..models.databases import job_database

TEXT_KEYS = ("queue", "name", "dedupe_key", "error")
TIME_KEYS = {
    "created_after": "created_at__gt",
    "created_before": "created_at__lt",
    "finished_after": "finished_at__gt",
    "finished_before": "finished_at__lt",
}
KEYS = ("queue", "name", "status", *TIME_KEYS, "dedupe_key", "error")
"""Every key a filter may hold, in the order the docs list them."""
MAX_TEXT = 1000
"""Characters a text value may hold: longer than any stored name or key."""


class FilterError(ValueError):
    """A filter that cannot be read; ``field`` is the key at fault (None: the whole filter)."""

    def __init__(self, message: str, field: str | None = None, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.unknown = unknown
        """The key is not a filter key (the API answers ``unknown_field``)."""


def parse(value: Any) -> dict[str, Any]:
    """The filter as given, checked: each value in its type, dates as aware datetimes.

    An empty filter is refused: it would act on every job, which an operator should say by
    naming the statuses.
    """
    if not isinstance(value, Mapping):
        raise FilterError(f"The filter must be an object of {', '.join(KEYS)}, not {value!r}.")
    unknown = sorted(str(key) for key in value if key not in KEYS)
    if unknown:
        raise FilterError(
            f"Unknown filter key {unknown[0]!r}; a filter takes {', '.join(KEYS)}.",
            unknown[0],
            unknown=True,
        )
    given = {key: value[key] for key in KEYS if key in value and value[key] is not None}
    if not given:
        raise FilterError(
            f"The filter is empty: name at least one of {', '.join(KEYS)} (to act on every "
            "job of some statuses, name them: status)."
        )
    parsed: dict[str, Any] = {}
    for key, item in given.items():
        if key in TEXT_KEYS:
            parsed[key] = _text(key, item)
        elif key == "status":
            parsed[key] = _statuses(item)
        else:
            parsed[key] = _datetime(key, item)
    return parsed


def jobs(parsed: Mapping[str, Any]) -> QuerySet[Job]:
    """The jobs a parsed filter matches (on the default manager: ``bulk`` picks the database)."""
    rows = Job.objects.using(job_database()).all()
    if "queue" in parsed:
        rows = rows.filter(queue=parsed["queue"])
    if "name" in parsed:  # a renamed job's rows under its former names (aliases) too
        rows = rows.filter(name__in=registry.names_of(parsed["name"]))
    if "status" in parsed:
        rows = rows.filter(status__in=parsed["status"])
    for key, lookup in TIME_KEYS.items():
        if key in parsed:
            rows = rows.filter(**{lookup: parsed[key]})
    if "dedupe_key" in parsed:
        rows = rows.filter(dedupe_key=parsed["dedupe_key"])
    if "error" in parsed:
        rows = rows.filter(last_error__contains=parsed["error"])
    return rows


def describe(parsed: Mapping[str, Any]) -> str:
    """The filter as JSON, for the admin log and the command's lines."""
    shown = {
        key: value.isoformat() if isinstance(value, dt.datetime) else value
        for key, value in parsed.items()
    }
    return json.dumps(shown, sort_keys=True, ensure_ascii=False)


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT or "\x00" in value:
        raise FilterError(
            f"{key} must be a non-empty string of at most {MAX_TEXT} characters without a NUL "
            f"character, not {value!r}.",
            key,
        )
    return value


def _statuses(value: Any) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    bad = [item for item in values if item not in Status.values]
    if bad or not values:
        raise FilterError(
            f"status must be one of {', '.join(Status.values)} or a non-empty list of them, "
            f"not {value!r}.",
            "status",
        )
    return tuple(dict.fromkeys(values))


def _datetime(key: str, value: Any) -> dt.datetime:
    """An aware datetime, or an ISO 8601 text of one (``2025-01-31T12:00:00Z``)."""
    when = value if isinstance(value, dt.datetime) else None
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            when = None
    if when is None:
        raise FilterError(
            f"{key} must be an ISO 8601 date and time (2025-01-31T12:00:00Z), not {value!r}.",
            key,
        )
    if timezone.is_naive(when):
        if django_settings.USE_TZ:
            raise FilterError(
                f"{key} must say its UTC offset (2025-01-31T12:00:00Z or +01:00), not {value!r}.",
                key,
            )
        return when
    # In UTC: Python takes offsets up to 24 hours, PostgreSQL only up to 16 (+16:46 was a
    # database error, a 500 from the API).
    try:
        return when.astimezone(dt.timezone.utc)
    except OverflowError:  # a time in year 1 with an offset behind UTC, or in year 9999 ahead
        raise FilterError(f"{key} is out of the range of dates, not {value!r}.", key) from None
