"""The worker row's upsert: one statement per heartbeat beat, whatever the database.

The columns are the ``Worker`` model's; every value is a parameter, the clock is the
database's (``DbNow`` compiled for the connection). ``started_at`` is written on the insert
only, so a row keeps the time its worker first beat. PostgreSQL and SQLite say it with
``ON CONFLICT``, MariaDB and MySQL with ``ON DUPLICATE KEY``; the ORM version (for a
database not listed in ``dialects``) is ``bulk_create`` with ``update_conflicts``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections
from django.db.models.sql import Query

from ..dbtime import DbNow
from ..models import Worker

STAMPED = ("started_at", "last_seen_at")
"""Columns set to the database's now; only ``last_seen_at`` changes on a later beat."""

Clause = Callable[[Callable[[str], str], Sequence[str]], str]
"""(quote_name, columns to update) -> the conflict clause of the INSERT."""


def on_conflict(quote: Callable[[str], str], columns: Sequence[str]) -> str:
    """PostgreSQL and SQLite."""
    updates = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in columns)
    return f"ON CONFLICT ({quote('worker_id')}) DO UPDATE SET {updates}"


def on_duplicate_key(quote: Callable[[str], str], columns: Sequence[str]) -> str:
    """MariaDB and MySQL (``worker_id`` is the table's only unique key besides ``id``)."""
    updates = ", ".join(f"{quote(c)} = VALUES({quote(c)})" for c in columns)
    return f"ON DUPLICATE KEY UPDATE {updates}"


def upsert(alias: str, row: dict[str, Any], clause: Clause) -> None:
    """INSERT the row, or update the one of the same ``worker_id``: one statement."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    now_sql, now_params = Query(None).get_compiler(connection=connection).compile(DbNow())
    names = [*row, *STAMPED]
    values = ", ".join(["%s"] * len(row) + [now_sql] * len(STAMPED))
    updated = [name for name in names if name not in ("worker_id", "started_at")]
    sql = (
        f"INSERT INTO {quote(Worker._meta.db_table)} ({', '.join(map(quote, names))}) "
        f"VALUES ({values}) {clause(quote, updated)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*row.values(), *list(now_params) * len(STAMPED)])


class WorkerRows:
    """The ORM's upsert; the dialects of the databases we know replace it with one INSERT."""

    def upsert_worker(self, alias: str, row: dict[str, Any]) -> None:
        stamped = {name: DbNow() for name in STAMPED}
        # A database that cannot name the conflict's target (MySQL) uses its only unique key.
        named = connections[alias].features.supports_update_conflicts_with_target
        Worker.objects.using(alias).bulk_create(
            [Worker(**row, **stamped)],
            update_conflicts=True,
            unique_fields=["worker_id"] if named else None,
            update_fields=[name for name in [*row, "last_seen_at"] if name != "worker_id"],
        )
