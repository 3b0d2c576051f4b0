"""Request bodies and query parameters: read within the limits, refused with the field named.

Values are checked here only as far as JSON types go (a list, an object, a string); what a
job's values may be is checked by the same ``validation`` functions a Python caller's enqueue
goes through, so both get the same messages.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, QueryDict

from ..core.conf import settings
from ..core.row_ids import MAX_ID, whole_number
from ..errors import JobValidationError
from ..models.databases import queue_databases
from .errors import ApiError


def body(request: HttpRequest, *, optional: bool = False) -> Any:
    """The request's JSON document; ``None`` for an empty body when ``optional``."""
    limit = settings.API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise _too_large(limit)
    try:
        raw = request.body
    except RequestDataTooBig:
        raise _too_large(limit) from None
    if len(raw) > limit:
        raise _too_large(limit)
    if not raw.strip() and optional:
        return None
    content_type = request.content_type or ""
    if content_type != "application/json":
        raise ApiError(
            "unsupported_media_type",
            f"Send the body as application/json, not {content_type or 'no content type'}.",
        )
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError("invalid_json", f"The body is not valid JSON: {exc}.") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _too_large(limit: int) -> ApiError:
    return ApiError(
        "body_too_large", f"The body is larger than LEASEJOBS_API_MAX_BODY_BYTES ({limit})."
    )


def json_object(value: Any, allowed: Iterable[str], where: str = "") -> dict[str, Any]:
    """``value`` as a JSON object holding only ``allowed`` keys."""
    if not isinstance(value, dict):
        raise ApiError("invalid", f"{where or 'The body'} must be a JSON object.", where or None)
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        field = f"{where}.{unknown[0]}" if where else unknown[0]
        raise ApiError(
            "unknown_field",
            f"Unknown field {unknown[0]!r}; this takes {', '.join(sorted(allowed))}.",
            field,
        )
    return value


def datetime_value(value: Any, field: str) -> dt.datetime:
    """An ISO 8601 date and time (``2025-01-31T12:00:00Z``); naivety is judged by the caller."""
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            pass
    raise ApiError(
        "invalid",
        f"{field} must be an ISO 8601 date and time such as 2025-01-31T12:00:00Z, not {value!r}.",
        field,
    )


def max_attempts(value: int) -> int:
    """An API caller's ``max_attempts`` (already a valid one) within the API's own cap."""
    most = settings.API_MAX_ATTEMPTS
    if value > most:
        raise JobValidationError(
            f"max_attempts must be at most {most} through the API "
            f"(LEASEJOBS_API_MAX_ATTEMPTS), not {value}."
        )
    return value


def query(request: HttpRequest, allowed: Iterable[str]) -> QueryDict:
    """The query string, refusing parameters the operation does not take or gives twice.

    ``database`` is taken by every operation that reads its query string: ``endpoint`` has
    already checked it and runs the view in that queue database (:func:`database`).
    """
    params = request.GET
    names = {*allowed, "database"}
    for name in params:
        if name not in names:
            raise ApiError(
                "unknown_parameter",
                f"Unknown query parameter {name!r}; this takes {', '.join(sorted(names))}.",
                name,
            )
        if len(params.getlist(name)) > 1:
            raise ApiError("invalid_parameter", f"Give {name} once.", name)
    return params


def limit(params: QueryDict) -> int:
    """``limit``: rows per page, from 1 to ``LEASEJOBS_API_MAX_PAGE_SIZE``."""
    most = settings.API_MAX_PAGE_SIZE
    if "limit" not in params:
        return min(settings.API_PAGE_SIZE, most)
    text = str(params["limit"])
    size = whole_number(text, most)
    if not size:
        raise ApiError(
            "invalid_parameter",
            f"limit must be a whole number from 1 to {most} (LEASEJOBS_API_MAX_PAGE_SIZE), "
            f"not {text!r}.",
            "limit",
        )
    return size


CURSOR_PREFIX = "before:"


def encode_cursor(last_id: int) -> str:
    """Opaque to clients: where the next page starts (rows with a smaller id)."""
    return base64.urlsafe_b64encode(f"{CURSOR_PREFIX}{last_id}".encode()).decode().rstrip("=")


def cursor(params: QueryDict) -> int | None:
    """The id the page starts below, from a ``cursor`` a previous page gave."""
    text = params.get("cursor")
    if text is None:
        return None
    try:
        decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        decoded = ""
    number = whole_number(decoded.removeprefix(CURSOR_PREFIX), MAX_ID)
    if not decoded.startswith(CURSOR_PREFIX) or number is None:
        raise ApiError(
            "invalid_parameter",
            "cursor is not a cursor this API gave (pass next_cursor back as it is).",
            "cursor",
        )
    return number


def name_filter(params: QueryDict, name: str) -> str | None:
    """A free-text filter (a queue or job name): refused with a NUL character, which no
    stored name holds and PostgreSQL cannot even compare (its driver raises a server error)."""
    value = params.get(name)
    if value is not None and "\x00" in value:
        raise ApiError("invalid_parameter", f"{name} must not contain a NUL character.", name)
    return value


def choice(params: QueryDict, name: str, choices: Iterable[str]) -> str | None:
    value = params.get(name)
    options = list(choices)
    if value is not None and value not in options:
        raise ApiError(
            "invalid_parameter", f"{name} must be one of {', '.join(options)}, not {value!r}.", name
        )
    return value


def database(request: HttpRequest) -> str | None:
    """The queue database ``?database=`` names (checked), or ``None`` for the home one.

    Ids repeat across queue databases (``LEASEJOBS_QUEUE_DATABASES``): a shard's job 42 is
    ``?database=ALIAS`` away, and the home job 42 stays where it was for every caller that
    does not say.
    """
    values = request.GET.getlist("database")
    if not values:
        return None
    if len(values) > 1:
        raise ApiError("invalid_parameter", "Give database once.", "database")
    return queue_database(values[0], "database", "invalid_parameter")


def queue_database(value: Any, field: str = "database", code: str = "invalid") -> str:
    """``value`` if it is a queue database's alias; else the error naming the queue databases."""
    known = queue_databases()
    if not isinstance(value, str) or value not in known:
        raise ApiError(
            code,
            f"database must be one of the queue databases, {', '.join(map(repr, known))} (the "
            f"home one and those of LEASEJOBS_QUEUE_DATABASES), not {value!r}.",
            field,
        )
    return value
