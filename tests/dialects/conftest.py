"""The dialect each test of this suite runs against: the database's own, then the ORM's.

Every test that takes ``dialect`` runs twice on whichever database ``DATABASE_URL`` names:
with the dialect ``for_alias`` picks for it, and with the base ``Dialect()`` (the ORM versions
a database without a dialect of its own gets). A new database is a class that passes both.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from django_leasejobs import dialects
from django_leasejobs.dialects import Dialect


@pytest.fixture(params=["vendor", "orm"])
def dialect(request: pytest.FixtureRequest) -> Dialect:
    if request.param == "orm":
        return Dialect()
    return dialects.for_alias(DEFAULT_DB_ALIAS)


@pytest.fixture
def vendor_dialect() -> Dialect:
    """The database's own dialect only: for what only it promises (a plan, a notification)."""
    return dialects.for_alias(DEFAULT_DB_ALIAS)


def locked_keys(keys: list[str], holder: Any, holder_pid: int | None) -> set[str]:
    """Which limiter ``keys`` another session holds, seen from the session ``holder``.

    Both ways a claim may hold a key: the limiter row locked (``FOR UPDATE``: the rows this
    session's ``SKIP LOCKED`` read passes over) and, on PostgreSQL, the transaction-level
    advisory lock of the key taken by the session ``holder_pid``.
    """
    key = holder.ops.quote_name("key")
    with holder.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute(
            f"SELECT {key} FROM django_leasejobs_limiter WHERE {key} IN "
            f"({', '.join(['%s'] * len(keys))}) FOR UPDATE SKIP LOCKED",
            keys,
        )
        free = {row[0] for row in cursor.fetchall()}
        cursor.execute("ROLLBACK")
        rows = {k for k in keys if k not in free}
        if holder.vendor != "postgresql":
            return rows
        # pg_locks shows a 64-bit advisory key as classid (high half) and objid (low half).
        cursor.execute(
            """
            SELECT k FROM unnest(%s::text[]) AS k
            WHERE EXISTS (
                SELECT 1 FROM pg_locks AS l
                WHERE l.locktype = 'advisory' AND l.pid = %s AND l.granted AND l.objsubid = 1
                  AND l.classid::bigint = (hashtextextended(k, 0) >> 32) & 4294967295
                  AND l.objid::bigint = hashtextextended(k, 0) & 4294967295
            )
            """,
            [keys, holder_pid],
        )
        return rows | {row[0] for row in cursor.fetchall()}


def backend_pid(alias: str = DEFAULT_DB_ALIAS) -> int | None:
    """The PostgreSQL session id of ``alias``'s connection (None elsewhere)."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def hold_key(holder: Any, cursor: Any, key: str) -> None:
    """Hold ``key`` in ``holder``'s open transaction as any claimer would: its limiter row
    locked, and (PostgreSQL) its advisory lock."""
    column = holder.ops.quote_name("key")
    cursor.execute(
        f"SELECT {column} FROM django_leasejobs_limiter WHERE {column} = %s FOR UPDATE", [key]
    )
    if holder.vendor == "postgresql":
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])
