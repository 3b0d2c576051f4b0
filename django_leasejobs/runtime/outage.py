"""Database outages: every worker thread logs them and waits with capped exponential backoff.

No busy loop, and no thread dies of an error: a thread that meets one logs a line, drops its
broken connection and tries again later. :class:`Outage` is the claim loop's count of errors in
a row (the other threads keep their own count in a local variable).
"""

from __future__ import annotations

import logging
import threading

from ..core.backoff import Backoff
from . import execution

logger = logging.getLogger("django_leasejobs")

BACKOFF_START = 0.25
"""Seconds to wait after the first database error; doubles on each error in a row."""

BACKOFF_CAP = 5.0
"""Longest wait between attempts to reach the database again."""

RECONNECT = Backoff(base=BACKOFF_START, cap=BACKOFF_CAP, jitter="none")
"""The wait before the next try after ``n`` database errors in a row, for every thread."""


def headline(exc: BaseException) -> str:
    """A database error's first line, short enough for a log line (its type if it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


class Outage:
    """The main thread's database errors in a row, and the wait they call for.

    Only the main thread (the claim loop, then shutdown on the same thread) uses it.
    """

    def __init__(self, worker_id: str, stopping: threading.Event) -> None:
        self.worker_id = worker_id
        self.stopping = stopping
        """Cuts a wait short: set by ``Control.stop``."""
        self.errors = 0

    def reset(self) -> None:
        """A statement went through: the next error waits the shortest time again."""
        self.errors = 0

    def backoff(self) -> float:
        return RECONNECT.ceiling(self.errors)

    def error(self, where: str, exc: BaseException, wait: bool = True) -> None:
        """Log, drop the broken connection, and wait (capped backoff; a stop cuts it short)."""
        self.errors += 1
        delay = self.backoff()
        logger.warning(
            "worker.database_error id=%s where=%s retry_in=%.2f error=%s",
            self.worker_id,
            where,
            delay,
            headline(exc),
        )
        execution.close_old_connections()
        if wait:
            self.stopping.wait(delay)
