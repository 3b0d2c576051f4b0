"""The worker's database connections: kept between jobs, checked after a pause, closed when idle.

Django closes a connection at the end of each request once ``CONN_MAX_AGE`` has passed, and
``startproject`` sets no ``CONN_MAX_AGE``: 0, a new connection per request. A job is not a
request, and the worker's threads are the library's own, so they keep their connections
between jobs whatever ``CONN_MAX_AGE`` says, without changing ``DATABASES``: a positive value
still ends a connection at that age; 0 no longer ends it after every job. What
``CONN_HEALTH_CHECKS`` would catch is caught here whatever it says: a connection that saw an
error, or sat unused for ``check_after`` seconds, is checked (Django's ``is_usable``: one
round trip) before its next query, and replaced if the server went away. A thread that waits
``close_after`` seconds for work closes its connection, so idle threads hold none.

The rules apply to the threads that :meth:`ConnectionKeeper.adopt` them (the worker's threads,
and the caller's thread while ``Worker.run`` uses it); anywhere else ``close_old_connections``
behaves as Django's.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

CHECK_AFTER = 1.0
"""Seconds a connection may go unused before its next use is preceded by a check. A busy
worker reuses its connections within milliseconds and never pays for it; an idle one pays one
round trip a second at most. A server gone in the last second is still met by the next query:
the error drops the connection and the worker retries (a handler's attempt fails and is
retried by its backoff)."""

CLOSE_AFTER = 60.0
"""Seconds a thread waits for work before it closes its connection. Reopening one costs a few
milliseconds, nothing beside a minute of idling, while a worker whose jobs come every few
seconds keeps its connections; 32 threads of an idle worker hold none after a minute."""

T_co = TypeVar("T_co", covariant=True)

_current = threading.local()


class _Gets(Protocol[T_co]):
    def get(self, block: bool = ..., timeout: float | None = ...) -> T_co: ...


def current() -> ConnectionKeeper | None:
    """The keeper of this thread's connections, or None where Django's rules apply."""
    keeper: ConnectionKeeper | None = getattr(_current, "keeper", None)
    return keeper


class ConnectionKeeper:
    """One worker's rules for its threads' connections; thresholds in seconds, for tests too."""

    def __init__(self, check_after: float = CHECK_AFTER, close_after: float = CLOSE_AFTER) -> None:
        self.check_after = check_after
        self.close_after = close_after
        self._seen = threading.local()
        """Per thread: alias -> ``time.monotonic()`` of the connection's last tidy."""

    def adopt(self) -> None:
        """This thread's ``close_old_connections`` follows these rules from now on."""
        _current.keeper = self

    @contextmanager
    def adopted(self) -> Iterator[None]:
        """Adopt a thread that is not ours (``Worker.run``'s caller) for a while, then give it
        back to Django's rules; its connections are left as Django set them."""
        before = current()
        self.adopt()
        try:
            yield
        finally:
            _current.keeper = before

    def tidy(self) -> None:
        """Between jobs: drop this thread's broken connections, keep the others (see above).

        Connections inside an atomic block (a caller's transaction) are left alone.
        """
        now = time.monotonic()
        seen = self._last_seen()
        for connection in self._connections(now):
            if connection.in_atomic_block:
                continue
            idle = now - seen.get(connection.alias, -math.inf)
            seen[connection.alias] = now
            if connection.connection is not None:
                self._tidy(connection, idle)

    def _tidy(self, connection: BaseDatabaseWrapper, idle: float) -> None:
        close_at = connection.close_at
        if connection.settings_dict["CONN_MAX_AGE"] == 0:
            connection.close_at = None  # for this call only: a job is not a request
        try:
            # Django's own rules: a connection left outside autocommit, or that saw an error
            # and fails ``is_usable``, is closed.
            connection.close_if_unusable_or_obsolete()
        finally:
            connection.close_at = close_at  # (``connect`` sets it anew after a close)
        if connection.connection is not None:
            # Checked before its next query (Django's ``close_if_health_check_failed``) if
            # it has been unused a while or the settings ask for it every time.
            check = idle >= self.check_after or connection.settings_dict["CONN_HEALTH_CHECKS"]
            connection.health_check_enabled = check  # type: ignore[attr-defined]  # not stubbed

    def close_if_idle(self) -> None:
        """Close this thread's connections not tidied for ``close_after`` seconds."""
        now = time.monotonic()
        seen = self._last_seen()
        for connection in self._connections(now):
            if connection.in_atomic_block or connection.connection is None:
                continue
            if now - seen.get(connection.alias, -math.inf) >= self.close_after:
                connection.close()

    def get(self, source: _Gets[T_co]) -> T_co:
        """The next item of a queue; a connection idle ``close_after`` s meanwhile is closed."""
        while True:
            wait = self._idle_wait()
            if wait is None:
                return source.get()
            try:
                return source.get(timeout=wait)
            except queue.Empty:
                self.close_if_idle()

    def _idle_wait(self) -> float | None:
        """Seconds until this thread's first open connection is idle; None if it holds none."""
        seen = self._last_seen()
        last = [
            seen.get(connection.alias, -math.inf)
            for connection in self._connections(time.monotonic())
            if connection.connection is not None and not connection.in_atomic_block
        ]
        if not last:
            return None
        return max(0.0, min(last) + self.close_after - time.monotonic())

    def _connections(self, now: float) -> list[BaseDatabaseWrapper]:
        """This thread's connection object of every alias (made, not opened, on first use).

        ``connections.all(initialized_only=True)`` reads a context-local twice per alias; called
        around every job, it cost more CPU than a no-op job's claim. Every alias's object,
        taken once, is the one a handler uses later, so the list is fixed; it is read again
        every ``check_after`` seconds, in case the project replaced one
        (``connections[alias] = ...``).
        """
        local = self._seen
        listed: list[BaseDatabaseWrapper] | None = getattr(local, "connections", None)
        if listed is None or now - local.listed_at >= self.check_after:
            listed = local.connections = list(connections.all())
            local.listed_at = now
        return listed

    def _last_seen(self) -> dict[str, float]:
        seen: dict[str, float] | None = getattr(self._seen, "times", None)
        if seen is None:
            seen = self._seen.times = {}
        return seen
