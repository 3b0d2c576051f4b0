"""PostgreSQL's fast path: a thread LISTENs and ends the claim loop's idle wait on NOTIFY.

It also hears cancel requests for running jobs and hands them to the watchdog at once; the
heartbeat brings the same requests within one interval when a notification is lost.

A notification only ends the wait early; polling every ``poll`` seconds stays the fallback, so a
lost notification delays a job by one poll interval at most.
"""

from __future__ import annotations

import threading

from ..core import notify
from . import listener
from .worker_state import WorkerState


class ListenerWakeup(WorkerState):
    def _start_listener(self) -> None:
        """PostgreSQL: LISTEN now (before the first idle wait) and wake the loop on NOTIFY.

        A notification only ends the idle wait early; the loop clears ``_wake`` before it
        claims, so one that lands between the claim and the wait is not lost either. Polling
        every ``poll`` seconds stays the fallback (a dropped LISTEN connection is reopened).
        """
        if not notify.supported():
            return
        self._listener = listener.Listener()
        self._listener.start()
        self._listener_thread = threading.Thread(
            target=self._listen_loop, name="leasejobs-listen", daemon=True
        )
        self._listener_thread.start()

    def _listen_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            queues = listener.wait(self.poll)
            if queues and (self.queues is None or not queues.isdisjoint(self.queues)):
                self._wake.set()
            self._request_cancel(listener.take_cancels())

    def _stop_listener(self) -> None:
        if self._listener is None:
            return
        self._listener.wake()
        if self._listener_thread is not None:
            self._listener_thread.join(timeout=max(self.poll, 1.0))
        self._listener.close()
