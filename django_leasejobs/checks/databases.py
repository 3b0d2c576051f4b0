"""System checks of the databases the jobs live on: a supported version, SQLite in WAL mode.

``leasejobs.E007`` and ``leasejobs.W001`` (described in :mod:`django_leasejobs.checks`) carry
Django's ``database`` tag: they query the database, so they run with
``manage.py check --database default`` and before ``migrate``, never on a plain ``check``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

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
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
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
    return messages


def database_version(connection: BaseDatabaseWrapper) -> tuple[str, tuple[int, ...]]:
    """("postgresql" | "sqlite" | "mariadb" | "mysql" | other vendor, version tuple)."""
    vendor = connection.vendor
    if vendor == "sqlite":
        return vendor, tuple(sqlite3.sqlite_version_info)  # the library Django's backend uses
    if vendor == "postgresql":
        connection.ensure_connection()
        number = connection.pg_version  # type: ignore[attr-defined]
        return vendor, (number // 10000, number % 10000)
    if vendor == "mysql":
        version = tuple(connection.mysql_version)  # type: ignore[attr-defined]
        return ("mariadb" if connection.mysql_is_mariadb else "mysql"), version  # type: ignore[attr-defined]
    return vendor, ()


def version_problem(vendor: str, version: tuple[int, ...]) -> str | None:
    """Why this database version is unsupported, or None when it is supported."""
    if vendor not in MINIMUM_VERSIONS:
        return f"The {vendor} database backend is not supported by django-leasejobs."
    minimum, label = MINIMUM_VERSIONS[vendor]
    if version < minimum:
        shown = ".".join(str(part) for part in version)
        return f"{label} or later is required; this database is {vendor} {shown}."
    return None
