"""LISTEN/NOTIFY on PostgreSQL: whether it is on, and its channel.

The sending side is the PostgreSQL dialect (the ``pg_notify`` travels in the enqueuing
statement, so it is delivered on commit and never for a rolled-back job); the receiving side
is ``listener.Listener``, in the worker.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import settings

CHANNEL = "leasejobs"
"""One channel for every queue; the payload is the queue name."""

CANCEL_CHANNEL = "leasejobs_cancel"
"""Cancel requests for running jobs; the payload is the job id. A channel of its own, so a
queue named like a number is never mistaken for one."""


def supported(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether enqueue notifies and workers may listen: PostgreSQL with LEASEJOBS_NOTIFY on."""
    return supported_on(connections[alias])


def supported_on(connection: BaseDatabaseWrapper) -> bool:
    """``supported()`` for a connection the caller already holds."""
    return connection.vendor == "postgresql" and settings.NOTIFY
