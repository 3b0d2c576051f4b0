"""What a database says of its replication, read on a replica the read side uses.

``LEASEJOBS_READ_DATABASES`` sends the admin's lists, the dashboard and the stats to a replica,
which may be behind its primary: an operator must see by how much before trusting a figure.
Each database answers in its own words (the ``replication`` capability of its dialect, one
statement); this is the shape they all answer in. A database with no replication of its own
(SQLite, or one whose dialect has no reader) answers "not a standby": its rows are current.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.backends.utils import CursorWrapper


@dataclass(frozen=True)
class Replication:
    """``standby``: the database replays another's changes (a PostgreSQL hot standby, a MariaDB
    replica). ``lag``: seconds behind its primary; 0 on a database that is no standby (it is
    its own primary); ``None`` when a standby cannot say (nothing replayed yet, replication
    stopped)."""

    standby: bool
    lag: float | None


NOT_A_STANDBY = Replication(standby=False, lag=0.0)


def not_replicated(cursor: CursorWrapper) -> Replication:
    """The answer of a database with no replication to ask about (SQLite)."""
    return NOT_A_STANDBY


@dataclass(frozen=True)
class ReplicationReader:
    """A dialect's capability (an attribute, not an operation: nothing in the protocol calls
    it): ``status`` reads, on an open cursor, whether the database is a standby and its lag."""

    status: Callable[[CursorWrapper], Replication]


NO_REPLICATION = ReplicationReader(not_replicated)
