"""The heartbeat thread: one ``protocol.heartbeat`` call extends every in-flight lease.

A job whose lease was lost (another worker reclaimed it) gets its ``lease_lost`` event set, so
its handler can stop; the worker never reports that attempt. Slots being reported or released
are left out, under ``_gate``, so a job just completed is never misread as a lost lease, and
so are attempts the worker ended under a running handler (a timeout, a cancel). The renewal
also returns the held jobs an operator asked to cancel: the watchdog ends them.
"""

from __future__ import annotations

import logging
import threading

from django.db import Error as DatabaseError
from django.db import connections

from .. import protocol
from . import execution
from .runtime_flush import RuntimeFlush
from .worker_state import headline

logger = logging.getLogger("django_leasejobs")


class HeartbeatThread(RuntimeFlush):
    def _start_heartbeat(self) -> None:
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat_loop, name="leasejobs-heartbeat", daemon=True
        )
        self._heartbeat_thread.start()

    def _heartbeat_loop(self) -> None:
        errors = 0
        try:
            while not self._heartbeat_stop.wait(self.heartbeat):
                try:
                    self._beat()
                    self._flush_runtimes()  # the lease advisor's counts, once per beat
                    errors = 0
                except DatabaseError as exc:
                    errors += 1
                    logger.warning(
                        "worker.database_error id=%s where=heartbeat errors=%s error=%s",
                        self.worker_id,
                        errors,
                        headline(exc),
                    )
                    execution.close_old_connections()
                except Exception:  # never lose the heartbeat thread
                    logger.exception("worker.heartbeat_error id=%s", self.worker_id)
        finally:
            connections.close_all()

    def _beat(self) -> None:
        with self._gate:
            with self._in_flight_lock:
                slots = [
                    s
                    for s in self._in_flight.values()
                    if not (s.reporting or s.released or s.ended_at is not None)
                ]
            if not slots:
                return
            execution.close_old_connections()
            renewal = protocol.renew(
                self.worker_id, [s.token for s in slots], lease_seconds=self.lease
            )
        for slot in slots:
            if slot.job.pk in renewal.lost:
                slot.lease_lost.set()
        self._request_cancel(renewal.cancel_requested)
