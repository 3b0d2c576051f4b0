"""The SQL that differs per database, behind one small interface: one method per operation.

The protocol asks ``for_alias(alias)`` for the dialect of the database it writes to and calls the
same methods on every database, the alias first: ``insert``, ``insert_many``, ``insert_rows``,
``claim_limited``, ``renew``, ``complete_one``, ``complete_many``, ``complete_steps``,
``count_steps``, ``announce``, ``announce_cancel``, ``announce_finished``, ``prune_limiters``,
``upsert_worker``, ``insert_logs``, ``check_sendable`` and ``require_utf8``
(``base.OPERATIONS``). What a database can do is an attribute of its dialect (``notifies``,
``utc_session``, ``journal_mode_query``, ``replication``), read through ``for_connection``,
``notifies()`` or ``replication()``: no code outside this package tests ``connection.vendor``.
Each owns its statements and transaction; its steps are private to the dialect.
``base.Dialect`` implements them with the ORM (what MariaDB and MySQL use); ``postgresql`` and
``sqlite`` replace the operations, or the steps of one, that their SQL does better. Each
database's code is a folder: ``base/``, ``postgresql/``, ``sqlite/``, ``mysql/``; ``sql``,
``tokens``, ``counting`` and ``waiting`` are shared. To add a database:
subclass ``Dialect``, override what its SQL can do in fewer statements, add it to ``_BY_VENDOR``,
and run ``tests/dialects`` against it. The layers above import this module alone (``__all__``),
never one of the package's modules: an import-linter contract says so.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..core.conf import settings
from . import session
from .base import (
    Completed,
    Completion,
    Dialect,
    LogRow,
    Renewed,
    Token,
    after,
    succeeded_fields,
)
from .base.limiter_pruning import prunable as prunable_limiters
from .base.replication import Replication
from .counting import CAP as COUNT_CAP
from .counting import Count, count
from .counting import Kind as CountKind
from .history import (
    drop_partition,
    history_migration,
    history_partitions,
    history_spans,
    make_partitions,
    make_partitions_since,
    partitioned,
)
from .mysql import MySQLDialect
from .postgresql import PostgreSQLDialect
from .sql import JOB, placeholders
from .sqlite import SQLiteDialect
from .waiting import oldest_due

# The package's public entry: the layers above import these names and no module of the
# package (the import-linter contract "Dialects: ..." in pyproject.toml). Beside the dialect
# of a database (for_alias, for_connection), what it can do (notifies), its session setup
# and the interface's types: what the protocol shares with the dialects (after,
# succeeded_fields), the read side's capped counts and oldest due jobs, and the pruning's
# table name, IN-list placeholders and prunable limiter rows.
__all__ = [
    "COUNT_CAP",
    "JOB",
    "Completed",
    "Completion",
    "Count",
    "CountKind",
    "Dialect",
    "LogRow",
    "Renewed",
    "Replication",
    "Token",
    "after",
    "count",
    "drop_partition",
    "for_alias",
    "for_connection",
    "history_migration",
    "history_partitions",
    "history_spans",
    "make_partitions",
    "make_partitions_since",
    "notifies",
    "oldest_due",
    "partitioned",
    "placeholders",
    "prepare_session",
    "prunable_limiters",
    "replication",
    "succeeded_fields",
]

_BY_VENDOR: dict[str, Dialect] = {
    "postgresql": PostgreSQLDialect(),
    "sqlite": SQLiteDialect(),
    "mysql": MySQLDialect(),
}
_ORM = Dialect()


def for_alias(alias: str) -> Dialect:
    """The dialect of the database behind ``alias`` (the ORM's, for a database not listed)."""
    return for_connection(connections[alias])


def for_connection(connection: BaseDatabaseWrapper) -> Dialect:
    """``for_alias`` for a connection the caller already holds."""
    return _BY_VENDOR.get(connection.vendor, _ORM)


def notifies(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether enqueues and finishes are announced and workers and waiters may listen: a
    database that notifies (PostgreSQL), with ``LEASEJOBS_NOTIFY`` on."""
    return for_alias(alias).notifies and settings.NOTIFY


def replication(alias: str) -> Replication:
    """Whether the database behind ``alias`` is a standby, and its lag (its dialect's
    ``replication`` capability). Inside a transaction, in a savepoint of its own: a refused
    statement (a missing privilege) must not break the caller's transaction."""
    connection = connections[alias]
    read = for_connection(connection).replication.status
    if connection.in_atomic_block:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            return read(cursor)
    with connection.cursor() as cursor:
        return read(cursor)


def prepare_session(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created`` receiver (the app config connects it): what the connection's
    dialect asks of a new session (MySQL and MariaDB: UTC, see ``session``)."""
    session.use_utc(connection, for_connection(connection).utc_session)
