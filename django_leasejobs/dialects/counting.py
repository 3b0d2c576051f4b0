"""Counting rows without reading millions of them: exact up to a cap, then an estimate.

An exact ``COUNT(*)`` reads every row it counts, so on a table of ten million jobs the admin's
page count or a queue's depth costs as much as the queue is long. Here a count reads at most
``CAP + 1`` rows (``SELECT count(*) FROM (SELECT 1 ... LIMIT CAP + 1)``): below the cap it is
exact, which is where exactness matters (a queue that drained to 3 says 3, however stale the
statistics). Above it, PostgreSQL gives the planner's estimate of the same query (``EXPLAIN``'s
row count, from the statistics ANALYZE keeps), marked as an estimate; other databases say "at
least CAP" (SQLite has no such statistics, and MariaDB's are per index, not per condition).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet

CAP = 10_000

_EXPLAIN = "EXPLAIN (FORMAT JSON) "


class Kind(str, enum.Enum):
    EXACT = "exact"
    ESTIMATE = "estimate"
    AT_LEAST = "at least"


@dataclass(frozen=True)
class Count:
    """A row count, and whether it is exact, the planner's estimate, or a lower bound."""

    value: int
    kind: Kind = Kind.EXACT

    @property
    def exact(self) -> bool:
        return self.kind is Kind.EXACT

    def text(self) -> str:
        """For people: ``1234``, ``~12,345,678`` (an estimate) or ``10,000+`` (at least)."""
        if self.kind is Kind.ESTIMATE:
            return f"~{self.value:,}"
        if self.kind is Kind.AT_LEAST:
            return f"{self.value:,}+"
        return str(self.value)

    def why(self) -> str:
        """A tooltip saying what an inexact count is ("" for an exact one)."""
        if self.kind is Kind.ESTIMATE:
            return f"over {CAP:,} rows: PostgreSQL's planner's estimate, not a count"
        if self.kind is Kind.AT_LEAST:
            return f"over {CAP:,} rows: counting stopped there"
        return ""


def count(queryset: QuerySet[Any], cap: int | None = None) -> Count:
    """The rows of ``queryset``: exact up to ``cap`` (default ``CAP``), estimated (or ``cap``,
    at least) above."""
    cap = CAP if cap is None else cap
    found = queryset.order_by()[: cap + 1].count()
    if found <= cap:
        return Count(found)
    guess = estimate(queryset)
    if guess is None:
        return Count(cap, Kind.AT_LEAST)
    return Count(max(guess, cap + 1), Kind.ESTIMATE)


def estimate(queryset: QuerySet[Any]) -> int | None:
    """The planner's row estimate for ``queryset`` (PostgreSQL), None on other databases.

    ``EXPLAIN`` plans without running: it costs a millisecond whatever the table's size.
    """
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    # The queryset's own statement and parameters, as Django compiles them: only the EXPLAIN
    # in front is written here.
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(_EXPLAIN + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
