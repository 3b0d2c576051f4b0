"""Reading the plans of the statements the library sends, with the parameters it sends them
with: Django's captured SQL has the values written in, which changes what SQLite's planner
may use (a partial index needs its condition's constants in the statement itself)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection


@contextmanager
def statements() -> Iterator[list[tuple[str, Any]]]:
    """The statements sent meanwhile, each with its parameters as the driver got them."""
    sent: list[tuple[str, Any]] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield sent


def explain(sql: str, params: Any) -> list[dict[str, Any]]:
    """The plan's rows, each by column name."""
    prefix = {"postgresql": "EXPLAIN (FORMAT JSON) ", "sqlite": "EXPLAIN QUERY PLAN "}
    with connection.cursor() as cursor:
        cursor.execute(prefix.get(connection.vendor, "EXPLAIN ") + sql, params)
        columns = [column[0] for column in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def sqlite_steps(sent: list[tuple[str, Any]]) -> list[str]:
    """SQLite: the steps of the plans of every read in ``sent``."""
    reads = [(sql, params) for sql, params in sent if sql.lstrip().upper().startswith("SELECT")]
    return [step["detail"] for sql, params in reads for step in explain(sql, params)]


def scanned_tables(plan: dict[str, Any]) -> Iterator[str]:
    """The relations a PostgreSQL plan reads with a sequential scan."""
    if plan["Node Type"] == "Seq Scan":
        yield plan["Relation Name"]
    for child in plan.get("Plans", []):
        yield from scanned_tables(child)
