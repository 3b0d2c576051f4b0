"""What the protocol hands the dialects to write a running attempt's end: its token, the
completion of a success, and the guards and fields every database writes the same way.

What a success writes is spelled once, in ``SUCCEEDED``: the ORM's update dictionary
(``succeeded_fields``) and the SET clause of every statement that completes jobs
(``succeeded_sql``) are both made from it, and a test checks that the two write the same
row on every database.
"""

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


class Param(NamedTuple):
    """A value given with each success: a driver parameter in SQL (``%(name)s``)."""

    name: str


NOW = Param("now")
"""The database's clock at the write (the statement's own clock text in SQL)."""

RESULT = Param("result")
"""What the handler returned (in SQL, the expression the statement reads it with)."""

FINISHED_BY = Param("finished_by")

SUCCEEDED: dict[str, Any] = {
    "status": Status.SUCCEEDED.value,
    "finished_at": NOW,
    "lease_owner": "",
    "finished_by": FINISHED_BY,
    "lease_expires_at": None,
    "live_dedupe_key": None,
    "in_history": True,
    "result": RESULT,
}
"""What a succeeded attempt writes on its row: column to a constant (a text or NULL) or to
what each success gives (``Param``). Column and field names are the same for all of them."""


def succeeded_fields(result: Any = None, finished_by: str = "") -> dict[str, Any]:
    """``SUCCEEDED`` as the ORM's update dictionary."""
    given = {NOW: DbNow(), RESULT: result, FINISHED_BY: finished_by}
    return {
        column: given[value] if isinstance(value, Param) else value
        for column, value in SUCCEEDED.items()
    }


def succeeded_sql(now: str, result: str) -> str:
    """``SUCCEEDED`` as the SET clause of a statement: ``now`` is the database's clock text,
    ``result`` the expression that reads a row's result, ``finished_by`` a named parameter."""
    given = {NOW: now, RESULT: result, FINISHED_BY: "%(finished_by)s"}
    parts = []
    for column, value in SUCCEEDED.items():
        if isinstance(value, Param):
            sql = given[value]
        elif value is None:
            sql = "NULL"
        elif value is True:
            sql = "TRUE"
        elif isinstance(value, str) and (value == "" or value.isidentifier()):
            sql = f"'{value}'"  # a constant of this module's own, never a caller's value
        else:
            raise TypeError(f"SUCCEEDED[{column!r}]: a text constant must be a plain word")
        parts.append(f"{column} = {sql}")
    return ", ".join(parts)


def tokens_q(tokens: Iterable[Token]) -> Q:
    """Rows held by these tokens: ``id IN (...)`` first, so the primary key is used."""
    tokens = list(tokens)
    q = Q(pk__in=[])
    for job_id, attempt in tokens:
        q |= Q(pk=job_id, attempt=attempt)
    # With only the OR of (id, attempt) pairs beside ``status = ...``, PostgreSQL chose the
    # status index and read every finished row of the table.
    return Q(pk__in=[job_id for job_id, _ in tokens]) & q
