"""NOTIFY as PostgreSQL's statements send it: the channels and payloads, shared with the
listening sides (``core.notify``), and whether it is on.

Only PostgreSQL's dialect sends a notification, so here "supported" is ``LEASEJOBS_NOTIFY``
alone; whether a database announces at all is its dialect's ``notifies`` (read through
``dialects.notifies``).
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from ...core.conf import settings
from ...core.notify import (
    CANCEL_CHANNEL,
    CHANNEL,
    FINISHED_CHANNEL,
    IDS_PER_NOTIFICATION,
    finished_payloads,
)

__all__ = [
    "CANCEL_CHANNEL",
    "CHANNEL",
    "FINISHED_CHANNEL",
    "IDS_PER_NOTIFICATION",
    "finished_payloads",
    "supported",
    "supported_on",
]


def supported(alias: str) -> bool:
    """Whether the statements sent to ``alias``, a PostgreSQL database, carry their NOTIFY."""
    return settings.NOTIFY


def supported_on(connection: BaseDatabaseWrapper) -> bool:
    """``supported()`` for a connection the caller already holds."""
    return settings.NOTIFY
