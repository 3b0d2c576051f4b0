"""What the protocol hands the dialects to write a running attempt's end: its token, the
completion of a success, and the guards and fields every database writes the same way."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from django.db.models import Q

from ..db.dbtime import DbNow
from ..models import Status


class Token(NamedTuple):
    """A running attempt: the job's id and its fencing token."""

    id: int
    attempt: int


class Completion(NamedTuple):
    """A succeeded attempt and what its handler returned (None: no result)."""

    id: int
    attempt: int
    result: Any = None


def tokens_q(tokens: Iterable[Token]) -> Q:
    """Rows held by these tokens: ``id IN (...)`` first, so the primary key is used."""
    tokens = list(tokens)
    q = Q(pk__in=[])
    for job_id, attempt in tokens:
        q |= Q(pk=job_id, attempt=attempt)
    # With only the OR of (id, attempt) pairs beside ``status = ...``, PostgreSQL chose the
    # status index and read every finished row of the table.
    return Q(pk__in=[job_id for job_id, _ in tokens]) & q


def succeeded_fields(result: Any = None, finished_by: str = "") -> dict[str, Any]:
    """What a succeeded attempt writes on its row."""
    return {
        "status": Status.SUCCEEDED,
        "finished_at": DbNow(),
        "lease_owner": "",
        "finished_by": finished_by,
        "lease_expires_at": None,
        "live_dedupe_key": None,
        "result": result,
    }
