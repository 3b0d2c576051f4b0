"""The heartbeat thread: one ``protocol.heartbeat`` call extends every in-flight lease.

A job whose lease was lost (another worker reclaimed it) gets its ``lease_lost`` event set, so
its handler can stop; the worker never reports that attempt. Slots being reported or released
are left out, under ``_gate``, so a job just completed is never misread as a lost lease, and
so are attempts the worker ended under a running handler (a timeout, a cancel). The renewal
also returns the held jobs an operator asked to cancel: the watchdog ends them.

Each beat also upserts the worker's row in the table of live workers, in one statement
whatever the number of jobs: host, pid, queues, capacity, and how many jobs it holds and
handlers are stuck right now. When the thread stops at a clean stop it deletes that row, on the
same connection. Like the renewals, the first beat comes one interval after the start: a run
shorter than that (a quick ``--burst``, a worker run inside a test's transaction) touches the
database from this thread not at all.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import socket
import threading

from django.db import Error as DatabaseError
from django.db import connections

from .. import protocol, upkeep
from . import execution
from .runtime_flush import RuntimeFlush
from .worker_state import headline

logger = logging.getLogger("django_leasejobs")


def _version() -> str:
    """The installed package's version, for the worker's row ("" when run from a bare checkout)."""
    try:
        return importlib.metadata.version("django-leasejobs")
    except importlib.metadata.PackageNotFoundError:
        return ""


VERSION = _version()


class HeartbeatThread(RuntimeFlush):
    def _start_heartbeat(self) -> None:
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat_loop, name="leasejobs-heartbeat", daemon=True
        )
        self._heartbeat_thread.start()

    def _heartbeat_loop(self) -> None:
        self.connection_keeper.adopt()
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
            if self._row_written:
                self._forget_self()
        finally:
            connections.close_all()

    def _beat(self) -> None:
        self._renew()
        self._report_self()

    def _renew(self) -> None:
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

    def _forget_self(self) -> None:
        """At a clean stop, delete the worker's row: here, on the connection that wrote it, so
        no later beat can bring it back."""
        try:
            execution.close_old_connections()
            upkeep.forget_worker(self.worker_id)
        except DatabaseError as exc:  # the row is left to be called lost, then pruned
            logger.warning(
                "worker.database_error id=%s where=forget error=%s", self.worker_id, headline(exc)
            )

    def _report_self(self) -> None:
        """The worker's row: one upsert, with its numbers as they are at this beat."""
        with self._summary_lock:
            stuck = len(self._stuck)
        self._row_written = True  # from the first try: an INSERT may commit and still raise
        upkeep.beat(
            upkeep.Beat(
                worker_id=self.worker_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                queues=",".join(self.queues) if self.queues is not None else "*",
                version=VERSION,
                concurrency=self.concurrency,
                async_concurrency=self.async_concurrency if self._async_enabled else 0,
                lease_seconds=self.lease,
                running=self.running,
                stuck=stuck,
            )
        )
