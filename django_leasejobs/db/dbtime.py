"""The database's clock as a query expression: the only "now" the protocol compares against."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models.functions import Now
from django.db.models.sql import Query

SQLITE_NOW = "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f000', 'NOW')"
"""SQLite's clock in Django's text format for datetimes (a ``%``-escaped SQL fragment)."""


class DbNow(Now):
    """``Now()``, with SQLite's millisecond clock written in Django's microsecond format.

    Django stores SQLite datetimes as text with six fractional digits, but SQLite's clock has
    three, so ``'12:00:00.345000' <= '12:00:00.345'`` is false as text: a job due in the
    current millisecond would look not yet due. Padding the clock to six digits makes text
    order equal time order again (the clock reads up to 1 ms early, never late).
    """

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(
            compiler,
            connection,
            template=SQLITE_NOW.replace("%", "%%"),
            **extra_context,
        )


def db_now(alias: str | None = None) -> dt.datetime:
    """The database's clock, read in one cheap query (for delays computed before an INSERT);
    by default the clock of the database jobs are written to. Aware, or naive UTC with
    ``USE_TZ = False`` (``as_set``), as the rows it is written into."""
    if alias is None:
        from ..models.databases import job_database

        alias = job_database()
    connection = connections[alias]
    sql, params = now_sql(connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql}", params)
        return as_set(cursor.fetchone()[0])


def now_sql(connection: Any) -> tuple[str, Any]:
    """The clock expression as this connection's backend writes it (SQL text of the backend's,
    no value in it; its parameters, if any, stay parameters)."""
    return Query(None).get_compiler(connection=connection).compile(DbNow())


def as_aware(raw: Any) -> dt.datetime:
    """A datetime the database gave back (SQLite: text), in UTC when it came naive."""
    if isinstance(raw, str):
        raw = dt.datetime.fromisoformat(raw)
    if raw.tzinfo is None:
        raw = raw.replace(tzinfo=dt.timezone.utc)
    return raw


def as_set(raw: Any) -> dt.datetime:
    """A datetime the database gave back, as the project's rows hold them: aware in UTC, or
    naive UTC with ``USE_TZ = False`` (whose ``TIME_ZONE`` must be UTC: check E009)."""
    moment = as_aware(raw)
    return moment if settings.USE_TZ else moment.astimezone(dt.timezone.utc).replace(tzinfo=None)
