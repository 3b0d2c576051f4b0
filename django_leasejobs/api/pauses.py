"""Pause and resume a queue or a job name, and list what is paused: the dashboard's buttons.

The target travels in the body (``{"kind": "queue" | "job", "name": ...}``), not in the path:
a job name may hold any character but white space, ``/`` and ``%`` included, which a path
segment cannot carry through every proxy unchanged. Both calls are idempotent: pausing what is
paused answers 200 with the pause already there, resuming what is not paused answers 404
``not_paused``; neither writes anything then, the admin log included.

A pause is a row of the queue database whose workers it holds back: a queue's pause and
resume go to that queue's database (``LEASEJOBS_QUEUE_DATABASES``), a job name's to every
queue database (``protocol.pauses`` decides, whatever ``?database=`` says); the list reads
``?database=``'s, else the home one.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.models import CHANGE
from django.http import HttpRequest, JsonResponse

from .. import protocol
from ..errors import JobValidationError
from ..models import Pause, PauseKind
from ..models.databases import queue_database, using_database
from ..protocol.pauses import Paused
from . import inputs
from .endpoint import audit
from .errors import ApiError
from .serialize import iso

KINDS = tuple(kind.value for kind in PauseKind)


def shape(item: Paused) -> dict[str, Any]:
    """A pause as JSON: ``Paused.as_dict`` with the API's UTC times."""
    return {**item.as_dict(), "paused_at": iso(item.paused_at)}


def _database(kind: str, name: str) -> str | None:
    """The database a queue's pause is written in, so that the admin log says it; ``None``
    for a job name's (written in each)."""
    return queue_database(name) if kind == PauseKind.QUEUE else None


def _target(request: HttpRequest) -> tuple[str, str]:
    """(kind, name) from the body, each checked as ``protocol.pause`` checks it."""
    document = inputs.json_object(inputs.body(request), ("kind", "name"))
    kind = document.get("kind")
    if kind not in KINDS:
        raise ApiError("invalid", f"kind must be one of {', '.join(KINDS)}, not {kind!r}.", "kind")
    name = document.get("name")
    if not isinstance(name, str):
        raise ApiError("invalid", f"name must be a {kind} name (a string), not {name!r}.", "name")
    try:
        return protocol.pauses.target(**{kind: name})
    except JobValidationError as exc:
        raise ApiError("invalid", str(exc), "name") from None


def _find(kind: str, name: str) -> Paused | None:
    return protocol.pauses.find(kind, name)  # where it lives: a shard's queue, in the shard


def _audit(request: HttpRequest, item: Paused, verb: str) -> None:
    # Against the pause row, as the admin logs it (gone after a resume: id and name still say).
    row = Pause(pk=item.id, kind=item.kind, name=item.name)
    audit(request, row, f"{verb} {item.kind} {item.name}", CHANGE)


def list_pauses(request: HttpRequest) -> JsonResponse:
    """Every pause (of one ``kind``, if given), by kind then name, each with its age."""
    params = inputs.query(request, ("kind",))
    kind = inputs.choice(params, "kind", KINDS)
    return JsonResponse({"results": [shape(item) for item in protocol.paused(kind)]})


def pause(request: HttpRequest) -> JsonResponse:
    """201 with the new pause, or 200 with the one already there."""
    kind, name = _target(request)
    with using_database(_database(kind, name)):
        return _pause(request, kind, name)


def _pause(request: HttpRequest, kind: str, name: str) -> JsonResponse:
    by = request.api_user.get_username()  # type: ignore[attr-defined]
    # Twice at most: a resume racing between the refused insert and the read leaves nothing
    # to show, and the second insert then succeeds (or a racing pause's row is read).
    for _ in range(2):
        try:
            created = protocol.pause(**{kind: name}, by=by)
        except JobValidationError as exc:  # a job name that names no job
            raise ApiError("invalid", str(exc), "name") from None
        if created is not None:
            _audit(request, created, "Paused")
            return JsonResponse(shape(created), status=201)
        existing = _find(kind, name)
        if existing is not None:
            return JsonResponse(shape(existing))
    raise ApiError("invalid_state", f"The {kind} {name} is being paused and resumed; try again.")


def resume(request: HttpRequest) -> JsonResponse:
    """200 with the pause lifted (its age is how long it lasted), or 404 ``not_paused``."""
    kind, name = _target(request)
    with using_database(_database(kind, name)):
        return _resume(request, kind, name)


def _resume(request: HttpRequest, kind: str, name: str) -> JsonResponse:
    by = request.api_user.get_username()  # type: ignore[attr-defined]
    lifted = protocol.resume(**{kind: name}, by=by)
    if lifted is None:
        raise ApiError("not_paused", f"The {kind} {name} is not paused.", "name")
    _audit(request, lifted, "Resumed")
    return JsonResponse(shape(lifted))
