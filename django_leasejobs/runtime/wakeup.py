"""PostgreSQL's fast path: a thread LISTENs and ends the claim loop's idle wait on NOTIFY.

It also hears cancel requests for running jobs and hands them to the watchdog at once; the
heartbeat brings the same requests within one interval when a notification is lost.

A notification only ends the wait early; polling every ``poll`` seconds stays the fallback, so a
lost notification delays a job by one poll interval at most.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .. import dialects
from ..protocol import job_database
from . import listener, threads

logger = logging.getLogger("django_leasejobs")


class Wakeup:
    """The LISTEN thread (PostgreSQL only; elsewhere :meth:`start` does nothing)."""

    def __init__(
        self,
        *,
        queues: list[str] | None,
        poll: float,
        wake: threading.Event,
        stopping: threading.Event,
        request_cancel: Callable[[set[int]], None],
    ) -> None:
        self.queues = queues
        self.poll = poll
        self.wake = wake
        """``Control.wake``: set here on a notification for one of the worker's queues."""
        self.stopping = stopping
        self.request_cancel = request_cancel
        """``Watchdog.request_cancel``."""
        self.listener: listener.Listener | None = None
        """Set by the main thread at the start, before the LISTEN thread runs."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """PostgreSQL: LISTEN now (before the first idle wait) and wake the loop on NOTIFY.

        A notification only ends the idle wait early; the loop clears ``wake`` before it
        claims, so one that lands between the claim and the wait is not lost either. Polling
        every ``poll`` seconds stays the fallback (a dropped LISTEN connection is reopened).
        """
        alias = job_database()  # the queue database: where enqueues send NOTIFY
        if not dialects.notifies(alias):
            return
        self.listener = listener.Listener(alias)
        self.listener.start()
        self._thread = threads.start(self._loop, name="leasejobs-listen")

    def _loop(self) -> None:
        listening = self.listener
        assert listening is not None
        while not self.stopping.is_set():
            try:
                queues = listening.wait(self.poll)
                if queues and (self.queues is None or not queues.isdisjoint(self.queues)):
                    self.wake.set()
                self.request_cancel(listening.take_cancels())
            except Exception:
                # The thread must outlive any error (a failover's half-closed socket): without
                # it the worker only polls. Log it, sleep one poll, listen again.
                logger.exception("notify.listen_error")
                self.stopping.wait(self.poll)

    def stop(self) -> None:
        if self.listener is None:
            return
        self.listener.wake()
        if self._thread is not None:
            self._thread.join(timeout=max(self.poll, 1.0))
        self.listener.close()
