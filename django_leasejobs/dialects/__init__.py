"""The SQL that differs per database, behind one small interface: one method per operation.

The protocol asks ``for_alias(alias)`` for the dialect of the database it writes to and calls the
same methods on every database, the alias first: ``insert``, ``insert_many``, ``claim_limited``,
``renew``, ``complete_one``, ``complete_many``, ``complete_steps``, ``count_steps``,
``announce``, ``announce_cancel``, ``announce_finished``, ``prune_limiters`` and
``upsert_worker`` (``base.OPERATIONS``). Each owns its statements and transaction; its steps
are private to the dialect. ``base.Dialect`` implements them with the ORM (what MariaDB and
MySQL use); ``postgresql`` and ``sqlite`` replace the operations, or the steps of one, that
their SQL does better. Each database's code is a folder: ``base/``, ``postgresql/``,
``sqlite/``, ``mysql/``; ``sql``, ``tokens``, ``counting`` and ``waiting`` are shared. To add a
database: subclass ``Dialect``, override what its SQL can do in fewer statements, add it to
``_BY_VENDOR``, and run ``tests/dialects`` against it.
"""

from __future__ import annotations

from django.db import connections

from .base import Completion, Dialect, Renewed, Token
from .mysql import MySQLDialect
from .postgresql import PostgreSQLDialect
from .sqlite import SQLiteDialect

__all__ = ["Completion", "Dialect", "Renewed", "Token", "for_alias"]

_BY_VENDOR: dict[str, Dialect] = {
    "postgresql": PostgreSQLDialect(),
    "sqlite": SQLiteDialect(),
    "mysql": MySQLDialect(),
}
_ORM = Dialect()


def for_alias(alias: str) -> Dialect:
    """The dialect of the database behind ``alias`` (the ORM's, for a database not listed)."""
    return _BY_VENDOR.get(connections[alias].vendor, _ORM)
