"""The receiving side of LISTEN/NOTIFY: idle workers wake when a job is enqueued.

A ``Listener`` holds its own connection (a connection waiting for notifications cannot run the
worker's queries) and ``wait()`` blocks until a notification, a ``wake()`` from another thread,
or the timeout. Notifications only shorten a worker's sleep; polling stays the fallback, so a
lost notification (a dropped connection) delays a job by at most one poll interval and loses
nothing.

A connection that cannot be opened (the server down, or a standby not yet promoted that a
``target_session_attrs=read-write`` connection refuses) is tried again with the backoff of the
worker's other threads, not at every wait: a worker polling every 0.1 s through a failover
would otherwise try ten connections a second and log each try.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import time
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from ..core.notify import CANCEL_CHANNEL, CHANNEL
from .outage import RECONNECT, headline

logger = logging.getLogger("django_leasejobs")


class Listener:
    """A dedicated LISTEN connection; use from one thread, ``wake()`` from any.

    ``wait()`` returns the set of queue names notified since the last call (empty on timeout
    or wake); job ids notified on the cancel channel gather in ``take_cancels()``. A broken
    connection is closed and opened again on the next ``wait()``; until then ``wait()`` just
    sleeps its timeout, so a worker falls back to polling, never spins.
    """

    def __init__(self, alias: str = DEFAULT_DB_ALIAS) -> None:
        self.alias = alias
        self._conn: Any = None
        self._cancels: set[int] = set()
        self._failures = 0
        """Tries to open the connection that failed in a row."""
        self._retry_at = 0.0
        """``time.monotonic()`` before which no new try is made."""
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)

    def _connect(self) -> Any:
        wrapper = connections[self.alias]
        conn = wrapper.get_new_connection(wrapper.get_connection_params())
        try:
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
            conn.execute(f"LISTEN {CANCEL_CHANNEL}")
        except BaseException:
            conn.close()
            raise
        return conn

    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def start(self) -> None:
        """Open the connection and LISTEN now, so nothing sent from here on is missed; after a
        failed try, not before its backoff has passed (0.25 s doubling up to 5 s)."""
        if self.connected() or time.monotonic() < self._retry_at:
            return
        try:
            self._conn = self._connect()
        except Exception as exc:
            self._conn = None
            self._failures += 1
            delay = RECONNECT.ceiling(self._failures)
            self._retry_at = time.monotonic() + delay
            logger.warning(
                "notify.listen_failed errors=%d retry_in=%.2f error=%s",
                self._failures,
                delay,
                headline(exc),
            )
            return
        if self._failures:
            logger.info("notify.listen_restored errors=%d", self._failures)
        self._failures = 0

    def wake(self) -> None:
        """Make a ``wait()`` in another thread return at once (shutdown, new local work)."""
        with contextlib.suppress(BlockingIOError):  # a full pipe: a wake is already pending
            os.write(self._wake_write, b"x")

    def wait(self, timeout: float) -> set[str]:
        self.start()
        fds = [self._wake_read]
        if self._conn is not None:
            queues = self._drain()
            if queues:
                return queues
        # _drain closes a connection it finds broken (the server's goodbye read by the last
        # wait, its closed socket only now): sleep on the wake pipe alone, reopen next time.
        if self._conn is not None:
            fds.append(self._conn.pgconn.socket)
        readable, _, _ = select.select(fds, [], [], max(0.0, timeout))
        if self._wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_read, 512):
                    pass
        return self._drain() if self._conn is not None else set()

    def _drain(self) -> set[str]:
        """Read what the server sent and return the payloads of pending notifications."""
        queues: set[str] = set()
        try:
            pgconn = self._conn.pgconn
            pgconn.consume_input()
            while (notice := pgconn.notifies()) is not None:
                if notice.relname.decode() == CANCEL_CHANNEL:
                    with contextlib.suppress(ValueError):  # not ours: ignore
                        self._cancels.add(int(notice.extra.decode()))
                else:
                    queues.add(notice.extra.decode())
        except Exception as exc:
            logger.warning("notify.connection_lost error=%s", exc)
            self._close_connection()
        return queues

    def take_cancels(self) -> set[int]:
        """Job ids whose cancel was notified since the last call (only the owner acts)."""
        cancels, self._cancels = self._cancels, set()
        return cancels

    def _close_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # already broken
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        self._close_connection()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
