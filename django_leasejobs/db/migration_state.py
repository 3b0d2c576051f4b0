"""Is the app's schema there? Tells an unmigrated database from one that is down.

A worker on a database without the app's tables used to retry ``no such table`` as if the
database were away, for ever. A missing table or migration is not an outage: commands stop at
once and name ``manage.py migrate``; an unreachable database is still waited for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router
from django.db.migrations.loader import MigrationLoader

APP = "django_leasejobs"


class Unreachable(Exception):
    """The database could not be asked (down, refused, wrong host): not a verdict on it."""


def unapplied(alias: str) -> list[str]:
    """The app's migrations not applied on ``alias``, in name order ([]: all applied).

    Raises :class:`Unreachable` when the database cannot be reached.
    """
    connection = connections[alias]
    try:
        connection.ensure_connection()
    except DatabaseError as exc:
        raise Unreachable(str(exc)) from exc
    # Reads django_migrations (missing: nothing applied) and the migration files on disk.
    loader = MigrationLoader(connection, ignore_no_migrations=True)
    known = {name for app, name in loader.disk_migrations if app == APP}
    applied = {name for app, name in loader.applied_migrations if app == APP}
    return sorted(known - applied)


def state(alias: str, missing: list[str]) -> str:
    """What is missing on ``alias``, in words."""
    if "0001_initial" in missing:
        return f"The database {alias!r} has no django_leasejobs tables"
    listed = ", ".join(missing)
    return f"The database {alias!r} lacks {len(missing)} django_leasejobs migration(s) ({listed})"


def advice(alias: str, missing: list[str]) -> str:
    """What to tell a person about ``missing`` migrations on ``alias``."""
    return f"{state(alias, missing)}: run `python manage.py {migrate_command(alias)}` first."


def migrate_command(alias: str) -> str:
    """The ``migrate`` that makes the app's tables on ``alias`` (a queue database of its own
    needs ``--database``: a plain ``migrate`` only migrates ``default``)."""
    return "migrate" if alias == DEFAULT_DB_ALIAS else f"migrate --database {alias}"


def check_applied(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``leasejobs.W010``: the app's migrations not applied on a database checked with
    ``manage.py check --database``. A warning, not an error: ``migrate`` runs the database
    checks before it migrates, and must not be stopped by what it is about to fix."""
    messages: list[checks.CheckMessage] = []
    for alias in databases or ():
        if not router.allow_migrate(alias, APP):
            continue
        try:
            missing = unapplied(alias)
        except Unreachable:
            continue  # Django's own checks report a database they cannot reach
        if missing:
            messages.append(
                checks.Warning(
                    # Also shown by migrate itself, before it applies them: no "run migrate".
                    f"{state(alias, missing)}.",
                    hint="Workers and the app's commands refuse to start until "
                    "`python manage.py migrate` has applied them.",
                    id="leasejobs.W010",
                )
            )
    return messages


def register() -> None:
    checks.register(check_applied, checks.Tags.database)
