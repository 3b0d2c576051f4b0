"""How far behind the replica the read side reads is, in words an operator acts on.

With ``LEASEJOBS_READ_DATABASES`` the admin's lists and dashboard, the stats and the API's lists
read a replica, which keeps that load off the primary but may show the past. Every page that
read one says which and how far behind it was (``text``), and past ``LEASEJOBS_READ_MAX_LAG``
that its figures are too stale to trust.

It keeps reading the replica then, rather than falling back to the primary: a replica falls
behind when the primary writes faster than it replays or it is itself overloaded, and moving
every dashboard and list onto the primary at that moment adds load where it hurts most, and
turns a visible lag into an invisible change of source. An operator who needs the primary's
rows has them on a job's page, which always reads the primary.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

from .. import dialects
from ..core.conf import settings
from ..core.durations import format_age
from ..models.databases import replica_database

logger = logging.getLogger("django_leasejobs")


@dataclass(frozen=True)
class ReplicaLag:
    """The replica read (``alias``), whether it is a standby, and its lag in seconds (``None``:
    unknown, with ``why``); ``limit`` is ``LEASEJOBS_READ_MAX_LAG`` when it was read."""

    alias: str
    standby: bool
    seconds: float | None
    limit: float
    why: str = ""

    @property
    def stale(self) -> bool:
        """Behind by more than the limit: the page's figures are not to be trusted."""
        return self.seconds is not None and self.seconds > self.limit

    def text(self) -> str:
        """One sentence for the top of a page that read the replica."""
        where = f"Read from the replica {self.alias}"
        if not self.standby and self.seconds is not None:
            return f"{where} (not a standby: its rows are current)."
        if self.seconds is None:
            return f"{where}; its lag is unknown ({self.why}): figures may be behind."
        behind = f"{where}, {_seconds(self.seconds)} behind"
        if self.stale:
            return (
                f"{behind}: too stale to trust (over LEASEJOBS_READ_MAX_LAG, "
                f"{_seconds(self.limit)}). A job's own page reads the primary."
            )
        return f"{behind}."

    def as_dict(self) -> dict[str, Any]:
        """For JSON answers (the detailed health view)."""
        return {
            "database": self.alias,
            "standby": self.standby,
            "lag_seconds": self.seconds,
            "stale": self.stale,
        }


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 60 else format_age(value)


def read(database: str | None = None) -> ReplicaLag | None:
    """The lag of the replica the read side uses for the queue database (``database``, else
    ``LEASEJOBS_DATABASE``'s); ``None`` when it reads no replica. One statement on the
    replica; an error there is an unknown lag, never a failed page."""
    alias = replica_database(database)
    if alias is None:
        return None
    limit = settings.READ_MAX_LAG
    try:
        status = dialects.replication(alias)
    except DatabaseError as exc:
        logger.warning("Could not read the lag of the replica %s: %s", alias, exc)
        return ReplicaLag(alias, standby=True, seconds=None, limit=limit, why="not readable")
    why = "" if status.lag is not None else "nothing replayed yet, or replication stopped"
    return ReplicaLag(alias, standby=status.standby, seconds=status.lag, limit=limit, why=why)
