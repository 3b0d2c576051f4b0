"""Per-connection setup that the lease protocol's database clock depends on.

MySQL and MariaDB evaluate ``NOW()``/``CURRENT_TIMESTAMP`` in the *session* time zone, which is
the server's system zone unless configured, while Django (``USE_TZ = True``) writes naive UTC
into ``DATETIME`` columns. On a server outside UTC the database clock and the stored times would
disagree by the zone's offset: jobs given a ``run_at`` would run hours early (or late), and
every timestamp the database writes (``created_at``, ``finished_at``, lease expiry) would be off.
Each new MySQL connection is therefore put in UTC, as PostgreSQL and SQLite already are. Django
itself never relies on the MySQL session zone (it stores DATETIME, not TIMESTAMP, and converts
with explicit ``CONVERT_TZ``), so this changes nothing else for the project.
"""

from __future__ import annotations

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper


def use_utc(connection: BaseDatabaseWrapper, statement: str | None) -> None:
    """Put a new session in UTC with ``statement``, its dialect's ``utc_session`` (called by
    ``dialects.prepare_session``, the ``connection_created`` receiver); nothing without
    ``USE_TZ`` or where the dialect has no such statement."""
    if statement is None or not settings.USE_TZ:
        return
    with connection.cursor() as cursor:
        cursor.execute(statement)
