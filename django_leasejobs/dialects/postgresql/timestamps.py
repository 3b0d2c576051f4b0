"""Timestamps read with psycopg's C loader, on one cursor at a time."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def timestamps_in_c(cursor: Any) -> None:
    """Let psycopg's C loader parse ``timestamptz`` on this cursor only.

    Django registers a Python subclass of it that swaps in the connection's zone; with
    ``USE_TZ`` the session already runs in that zone, so both give the same instants.
    """
    if not settings.USE_TZ:
        return
    try:
        from psycopg.types.datetime import TimestamptzLoader
    except ImportError:  # psycopg2: its C loader is already in use
        return
    cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
