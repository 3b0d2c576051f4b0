"""MariaDB and MySQL: the ORM's ways (``base.Dialect``) are theirs.

The locking claim in ``Dialect._claim`` is written for InnoDB (candidates read first, then only
they are locked with SKIP LOCKED); MariaDB 10.5+ returns the ids of a bulk INSERT, MySQL 8 gets
one INSERT per row in the same transaction; the worker row's upsert is Django's
``ON DUPLICATE KEY UPDATE``.
"""

from __future__ import annotations

from ..base.dialect import Dialect
from . import replication_status


class MySQLDialect(Dialect):
    """No statement of its own but the session's zone: named so that ``for_alias`` shows
    which database it serves."""

    utc_session = "SET time_zone = '+00:00'"  # the session's clock is NOW()'s (``session``)
    replication = replication_status.READER
