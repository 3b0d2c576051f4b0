"""The heartbeat thread: one ``protocol.heartbeat`` call extends every in-flight lease.

A job whose lease was lost (another worker reclaimed it) gets its ``lease_lost`` event set, so
its handler can stop; the worker never writes that attempt's end. Slots being written or
released are left out, under ``InFlight.gate``, so a job just completed is never misread as a
lost lease, and so are attempts the worker ended under a running handler (a timeout, a
cancel). The renewal also returns the held jobs an operator asked to cancel: the watchdog ends
them.

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
from collections.abc import Callable

from django.db import Error as DatabaseError
from django.db import connections

from .. import protocol, upkeep
from ..core import otel_metrics
from . import execution, telemetry, threads
from .connection_keeper import ConnectionKeeper
from .ledger import Ledger
from .options import WorkerOptions
from .outage import headline
from .slots import InFlight

logger = logging.getLogger("django_leasejobs")


def _version() -> str:
    """The installed package's version, for the worker's row ("" when run from a bare checkout)."""
    try:
        return importlib.metadata.version("django-leasejobs")
    except importlib.metadata.PackageNotFoundError:
        return ""


VERSION = _version()


class Heartbeat:
    """The heartbeat thread: renews, upserts the worker's row, flushes the runtime counts."""

    def __init__(
        self,
        *,
        options: WorkerOptions,
        slots: InFlight,
        ledger: Ledger,
        keeper: ConnectionKeeper,
        request_cancel: Callable[[set[int]], None],
    ) -> None:
        self.options = options
        self.slots = slots
        self.ledger = ledger
        self.keeper = keeper
        self.request_cancel = request_cancel
        """``Watchdog.request_cancel``: the renewal brings the held jobs to cancel."""
        self._stop = threading.Event()
        """Set by shutdown (main thread); the heartbeat thread waits on it between beats."""
        self._thread: threading.Thread | None = None
        self._row_written = False
        """The thread tried to write the worker's row: at a clean stop it deletes it (heartbeat
        thread only)."""

    def start(self) -> None:
        self._thread = threads.start(self._loop, name="leasejobs-heartbeat")

    def signal_stop(self) -> None:
        """Let the thread end after its current beat (it then deletes the worker's row)."""
        self._stop.set()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=max(self.options.heartbeat, 1.0))

    def _loop(self) -> None:
        self.keeper.adopt()
        errors = 0
        worker_id = self.options.worker_id
        try:
            while not self._stop.wait(self.options.heartbeat):
                try:
                    self.beat()
                    self.ledger.flush_runtimes()  # the lease advisor's counts, once per beat
                    errors = 0
                except DatabaseError as exc:
                    errors += 1
                    logger.warning(
                        "worker.database_error id=%s where=heartbeat errors=%s error=%s",
                        worker_id,
                        errors,
                        headline(exc),
                    )
                    execution.close_old_connections()
                except Exception:  # never lose the heartbeat thread
                    logger.exception("worker.heartbeat_error id=%s", worker_id)
            if self._row_written:
                self._forget_self()
        finally:
            connections.close_all()

    def beat(self) -> None:
        """One beat: renew every lease, then write the worker's row."""
        self._renew()
        self._record_self()

    def _renew(self) -> None:
        with self.slots.gate:
            slots = self.slots.renewable()
            if not slots:
                return
            execution.close_old_connections()
            renewal = protocol.renew(
                self.options.worker_id, [s.token for s in slots], lease_seconds=self.options.lease
            )
        for slot in slots:
            if slot.job.pk in renewal.lost and slot.lease_lost.set():
                telemetry.lost(slot.job, otel_metrics.HEARTBEAT)
        self.request_cancel(renewal.cancel_requested)

    def _forget_self(self) -> None:
        """At a clean stop, delete the worker's row: here, on the connection that wrote it, so
        no later beat can bring it back."""
        try:
            execution.close_old_connections()
            upkeep.forget_worker(self.options.worker_id)
        except DatabaseError as exc:  # the row is left to be called lost, then pruned
            logger.warning(
                "worker.database_error id=%s where=forget error=%s",
                self.options.worker_id,
                headline(exc),
            )

    def _record_self(self) -> None:
        """The worker's row: one upsert, with its numbers as they are at this beat."""
        options = self.options
        stuck = self.ledger.stuck_now
        self._row_written = True  # from the first try: an INSERT may commit and still raise
        upkeep.beat(
            upkeep.Beat(
                worker_id=options.worker_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                queues=",".join(options.queues) if options.queues is not None else "*",
                version=VERSION,
                concurrency=options.concurrency,
                async_concurrency=options.async_slots,
                lease_seconds=options.lease,
                running=self.slots.running,
                stuck=stuck,
            )
        )
