"""``POST jobs/bulk/``: cancel, retry or delete every job a filter matches, or count them.

Thin over :mod:`django_leasejobs.bulk`: the body is read here, the filter by ``bulk.parse`` (its
refusals name the key, as ``filter.<key>``), and the action needs the permission the same
action on one job needs (``cancel_job``, ``replay_deadletter``, ``delete_job``); a dry run,
which changes nothing, needs only ``view_job``. The admin log entry is written under the
token's (or session's) user. It acts in one queue database: ``database`` in the body or the
query (``?database=``), else the home one.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from .. import bulk
from ..models.databases import home_database, job_database, using_database
from . import auth, inputs
from .errors import ApiError

FIELDS = ("action", "filter", "dry_run", "database")


def bulk_action(request: HttpRequest) -> JsonResponse:
    """200 ``{"matched": N}`` for a dry run; else also what changed and what was left."""
    document = inputs.json_object(inputs.body(request), FIELDS)
    if "database" not in document:
        return _act(request, document)  # in ?database='s, which endpoint set
    alias = inputs.queue_database(document["database"])
    if "database" in request.GET and request.GET["database"] != alias:
        raise ApiError(
            "invalid",
            f"database is {alias!r} in the body but {request.GET['database']!r} in the query: "
            "give one.",
            "database",
        )
    with using_database(alias):
        return _act(request, document)


def _act(request: HttpRequest, document: dict[str, Any]) -> JsonResponse:
    action = _action(document)
    dry_run = document.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise ApiError("invalid", f"dry_run must be true or false, not {dry_run!r}.", "dry_run")
    if not dry_run:
        auth.require(request.api_user, (action.permission,))  # type: ignore[attr-defined]
    if "filter" not in document:
        raise ApiError(
            "invalid", f"filter is required: an object of {', '.join(bulk.KEYS)}.", "filter"
        )
    try:
        parsed = bulk.parse(document["filter"])
        bulk.check_statuses(action, parsed)
    except bulk.FilterError as exc:
        field = f"filter.{exc.field}" if exc.field else "filter"
        raise ApiError("unknown_field" if exc.unknown else "invalid", str(exc), field) from None
    rows = bulk.jobs(parsed)
    if dry_run:
        return JsonResponse({"matched": bulk.preview(action, rows).matched})
    result = bulk.run(
        action,
        rows,
        user_id=request.api_user.pk,  # type: ignore[attr-defined]
        description=bulk.describe(parsed) + _where(),
        source="API",
    )
    return JsonResponse(
        {
            "matched": result.matched,
            "changed": result.changed,
            "left": result.left,
            "refused": [{"job_id": pk, "reason": why} for pk, why in result.refusals],
        }
    )


def _action(document: dict[str, Any]) -> bulk.Action:
    try:
        return bulk.action_named(document.get("action"))
    except ValueError as exc:
        raise ApiError("invalid", str(exc), "action") from None


def _where() -> str:
    """The database in the admin log's message, when not the home one (ids repeat)."""
    alias = job_database()
    return f" in database {alias!r}" if alias != home_database() else ""
