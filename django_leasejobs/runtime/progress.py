"""A running attempt's progress updates: the latest kept, written at most about once a second.

``ctx.progress()`` returns at once. An update is written when ``INTERVAL`` has passed since
the attempt's last write (the first one at once); the updates in between only replace the
pending one, which the next due update, or the attempt's end, writes. The runner calls
:meth:`Progress.flush` after the handler returned and before the attempt's end is written,
so the last update is in the row when the job is seen finished; a success's completion stays
one statement shared with others (:mod:`.completions`).

Where an update is written from:

* a sync handler: its own thread and connection, unless the handler is inside a transaction
  it opened (the UPDATE would hold the job's row lock until it commits, and the worker's
  heartbeat would wait for it): the update then waits for a later one, or the end;
* an async handler: ``sync_to_async`` on asgiref's thread (the one its async ORM calls use),
  as a task of its own, since nothing may touch the database on the event loop.

With an OpenTelemetry SDK recording the attempt's ``process`` span, updates are its events
(``leasejobs.progress``), throttled as the writes are: the first at once, then at most one an
``INTERVAL``, and the last update always, just before the span ends. Each update would be
too many for a handler updating in a tight loop (and past the SDK's limit of events per span,
the later ones, which matter most, would be dropped).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import Error as DatabaseError
from django.db import connections

from .. import protocol
from ..core import tracing
from ..protocol import ProgressUpdate

logger = logging.getLogger("django_leasejobs")

INTERVAL = 1.0
"""Seconds between two writes of one attempt's progress (the last update is always written)."""


class Progress:
    """One attempt's updates. ``_latest``, ``_written`` and ``_last_write`` change under
    ``_lock``: the handler's thread (or its tasks) and the runner's flush may both write.
    Writes are one at a time (``_write_lock``, taken before ``_lock``) and each writes the
    latest update of its moment, so the last write, the flush's, holds the last update."""

    def __init__(
        self,
        job_id: int,
        attempt: int,
        *,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        atomic_depth: int | None = None,
        span: Any = None,
    ) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.interval = INTERVAL if interval is None else interval
        self.clock = clock
        self.atomic_depth = atomic_depth
        """The handler's connection's atomic depth when it was called (sync handlers); a
        deeper one is a transaction of the handler's own. None: not checked (async)."""
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._latest: ProgressUpdate | None = None
        self._written: ProgressUpdate | None = None
        self._last_write: float | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.span = span
        """The attempt's recording span, whose events the updates become (None: no events)."""
        self._evented: ProgressUpdate | None = None
        self._last_event: float | None = None

    def update(self, done: Any, total: Any = None, message: Any = "") -> None:
        """Validate and keep the update; write it now if the interval allows it."""
        update = protocol.progress_update(done, total, message)
        in_loop = _running_loop()
        with self._lock:
            self._latest = update
            now = self.clock()
            if self.span is not None and (
                self._last_event is None or now - self._last_event >= self.interval
            ):
                self._last_event = now
                self._evented = update
                tracing.progressed(self.span, *update)
            due = self._last_write is None or now - self._last_write >= self.interval
            if not due or (in_loop is None and self._in_own_transaction()):
                return
            self._last_write = now
        if in_loop is None:
            self._write_latest()
            return
        task = in_loop.create_task(sync_to_async(self._write_latest, thread_sensitive=True)())
        self._tasks.add(task)  # a reference until done: the loop keeps only weak ones
        task.add_done_callback(self._tasks.discard)

    def end_events(self) -> None:
        """The span is ending: the latest update becomes its event unless it is one already."""
        with self._lock:
            update = self._latest
            if self.span is None or update is None or update is self._evented:
                return
            self._evented = update
            tracing.progressed(self.span, *update)

    def flush(self) -> None:
        """Write the latest update unless it was written (the attempt is ending): called by
        the runner, in a thread that may use the database, before the end is written."""
        self._write_latest()

    @property
    def pending(self) -> bool:
        """An update not yet written."""
        return self._latest is not None and self._latest is not self._written

    def _write_latest(self) -> None:
        with self._write_lock:
            with self._lock:
                update = self._latest
            if update is None or update is self._written:
                return
            try:
                protocol.record_progress(self.job_id, self.attempt, update)
            except DatabaseError as exc:
                # Kept pending, for the next due update or the end: an update that cannot be
                # written must not fail the handler, nor cost the attempt its result.
                logger.warning(
                    "job.progress_error id=%s attempt=%s error=%s", self.job_id, self.attempt, exc
                )
                return
            with self._lock:
                self._written = update

    def _in_own_transaction(self) -> bool:
        if self.atomic_depth is None:
            return False
        connection = connections[protocol.job_database()]
        return len(connection.atomic_blocks) > self.atomic_depth


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
