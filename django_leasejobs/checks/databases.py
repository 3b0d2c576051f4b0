"""System checks of the databases the jobs live on: a supported version, SQLite in WAL mode,
PostgreSQL's autovacuum on (every job leaves dead row versions behind in the job table: with
nothing reclaiming them the table and its claim indexes grow for as long as jobs run).

``leasejobs.E007``, ``leasejobs.W001`` and ``leasejobs.W016`` (described in
:mod:`django_leasejobs.checks`) carry Django's ``database`` tag: they query the database, so
they run with ``manage.py check --database default`` and before ``migrate``, never on a plain
``check``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from .. import dialects

MINIMUM_VERSIONS = {
    "postgresql": ((13,), "PostgreSQL 13"),
    "sqlite": ((3, 35), "SQLite 3.35"),
    "mariadb": ((10, 6), "MariaDB 10.6"),
    "mysql": ((8, 0), "MySQL 8.0"),
}

Messages = list[checks.CheckMessage]


def check_databases(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> Messages:
    from ..models import Job

    messages: Messages = []
    for alias in databases or ():
        if router.allow_migrate_model(alias, Job):
            messages += connection_messages(connections[alias])
    return messages


def connection_messages(connection: BaseDatabaseWrapper) -> Messages:
    """The version and journal-mode checks of one database connection."""
    messages: Messages = []
    vendor, version = database_version(connection)
    problem = version_problem(vendor, version)
    if problem:
        messages.append(
            checks.Error(
                problem,
                hint="django-leasejobs supports PostgreSQL 13+, SQLite 3.35+ (RETURNING), "
                "MariaDB 10.6+ and MySQL 8 (SKIP LOCKED).",
                id="leasejobs.E007",
            )
        )
    journal_mode_query = dialects.for_connection(connection).journal_mode_query
    if journal_mode_query is not None:
        with connection.cursor() as cursor:
            cursor.execute(journal_mode_query)
            mode = str(cursor.fetchone()[0]).lower()
        if mode not in ("wal", "memory"):
            messages.append(
                checks.Warning(
                    f"SQLite database {connection.alias!r} is in journal mode {mode!r}, not WAL: "
                    "a worker's writes block every reader, and readers block the worker.",
                    hint='Add "init_command": "PRAGMA journal_mode=WAL;" to its OPTIONS (and '
                    '"transaction_mode": "IMMEDIATE"), or run PRAGMA journal_mode=WAL once.',
                    id="leasejobs.W001",
                )
            )
    if vendor == "postgresql" and not autovacuum_on(connection):
        messages.append(
            checks.Warning(
                f"PostgreSQL database {connection.alias!r} runs with autovacuum off: the dead "
                "row versions every job leaves in the job table are never reclaimed, so the "
                "table and its claim indexes grow for as long as jobs run.",
                hint="Set autovacuum = on in postgresql.conf (PostgreSQL's default), or run "
                "VACUUM on the app's tables at least every few minutes.",
                id="leasejobs.W016",
            )
        )
    return messages


def autovacuum_on(connection: BaseDatabaseWrapper) -> bool:
    """Whether the PostgreSQL server's autovacuum launcher runs (``SHOW autovacuum``)."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return str(cursor.fetchone()[0]).lower() == "on"


def database_version(connection: BaseDatabaseWrapper) -> tuple[str, tuple[int, ...]]:
    """("postgresql" | "sqlite" | "mariadb" | "mysql" | another product, version tuple): the
    product as Django's backend names it (``display_name``: MariaDB apart from MySQL) and the
    version it reads (the SQLite library it uses; ``()`` for a product not supported)."""
    product = str(connection.display_name).lower()
    if product not in MINIMUM_VERSIONS:
        return product, ()
    connection.ensure_connection()
    return product, tuple(connection.get_database_version())


def version_problem(vendor: str, version: tuple[int, ...]) -> str | None:
    """Why this database version is unsupported, or None when it is supported."""
    if vendor not in MINIMUM_VERSIONS:
        return f"The {vendor} database backend is not supported by django-leasejobs."
    minimum, label = MINIMUM_VERSIONS[vendor]
    if version < minimum:
        shown = ".".join(str(part) for part in version)
        return f"{label} or later is required; this database is {vendor} {shown}."
    return None
