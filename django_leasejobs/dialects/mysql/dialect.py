"""MariaDB and MySQL: the ORM's ways (``base.Dialect``) are theirs, but for fair keys' reads.

The locking claim in ``Dialect._claim`` is written for InnoDB (candidates read first, then only
they are locked with SKIP LOCKED); MariaDB 10.5+ returns the ids of a bulk INSERT, MySQL 8 gets
one INSERT per row in the same transaction; the worker row's upsert is Django's
``ON DUPLICATE KEY UPDATE``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import fair_lines
from ..base.dialect import Dialect
from . import replication_status

FAIR_COLUMNS = fair_lines.Columns(
    "fair_waiting_run_at",
    "fair_waiting_run_at IS NOT NULL",
    "fair_waiting_at",
    "fair_waiting_at IS NOT NULL",
)
"""The fair reads' columns here: InnoDB has no partial index, so migration 0027 adds virtual
columns that hold ``run_at`` and ``fair_at`` only while a fair job waits (NULL otherwise), and
indexes them. Read from the job's own columns, a queue's head walked every finished job of the
queue first: 41 ms an enqueue beside 50,000 of them."""


class MySQLDialect(Dialect):
    """No statement of its own but the session's zone: named so that ``for_alias`` shows
    which database it serves."""

    utc_session = "SET time_zone = '+00:00'"  # the session's clock is NOW()'s (``session``)
    replication = replication_status.READER

    def _fair_lines(self, alias: str, groups: Sequence[fair_lines.Group]) -> list[fair_lines.Line]:
        return fair_lines.read_lines(alias, groups, FAIR_COLUMNS)
