"""The event loop: ``async def`` handlers run on one loop thread, the rest on the pool.

Sync and async jobs share everything but the thread that runs them: one claim, the same
in-flight slots (so one heartbeat renews both and sets ``lease_lost`` on both), the same
fenced writes. At most ``async_concurrency`` handlers run at once (an ``asyncio.Semaphore``);
a job claimed beyond that waits for it, leased and renewed like a sync job waiting for a thread.

The loop thread is started only when this process can meet an async handler
(``async_execution.possible()``: an async ``@job`` is registered, or the tasks backend is
configured). A project of sync jobs gets no extra thread and no extra claim capacity.

Reporting never blocks the loop: taking a finished slot out of the heartbeat goes through
``InFlight.gate``, which the heartbeat holds across a database statement, and a failure or a
returned value is a database write. So the loop only puts ``(slot, result)`` on a queue; two
writer threads do exactly what a pool thread does after its handler (:mod:`.result_writing`):
plain successes join the grouped completions list (one statement per flush, by the claim
loop), anything else goes through ``attempt_ends.write_result`` with the pool's retry on database
errors. Threads of our own rather than ``run_in_executor``: their number is fixed, and each
closes its connections when it stops.
"""

from __future__ import annotations

import asyncio
import logging
import queue as queue_module
import threading
import time

from django.db import connections

from ..models import Job
from . import async_execution, execution, threads
from .connection_keeper import ConnectionKeeper
from .result_writing import Finished, ResultWriter
from .slots import Slot, SlotState
from .watchdog import Watchdog

logger = logging.getLogger("django_leasejobs")

REPORTER_THREADS = 2
"""Threads writing async results; most results are plain successes, grouped by the claim loop."""

TIDY_EVERY = 1.0
"""Seconds between tidies of the async ORM thread's connection (and after every failed
attempt), rather than a thread hop around each job."""

STOP_WAIT = 1.0
"""Seconds the loop gives cancelled handlers to return when the worker stops."""


class AsyncPool:
    """The event-loop thread and its writer threads (an :class:`~.pool.Executor`)."""

    _limit: asyncio.Semaphore
    """``async_slots`` handlers at once; made by :meth:`start`, used on the loop only."""

    def __init__(
        self,
        *,
        worker_id: str,
        async_slots: int,
        keeper: ConnectionKeeper,
        writer: ResultWriter,
        watchdog: Watchdog,
        wake: threading.Event,
    ) -> None:
        self.worker_id = worker_id
        self.async_slots = async_slots
        """Handlers at once; 0: this process meets no async handler, nothing is started."""
        self.keeper = keeper
        self.writer = writer
        self.watchdog = watchdog
        self.wake = wake
        """``Control.wake``: set when a writer thread has freed slots."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """Set by the main thread once the loop runs; read by the claim loop and the
        watchdog (``call_soon_threadsafe``) from then on."""
        self.thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        """The running job tasks: on the loop only."""
        self._results: queue_module.SimpleQueue[Finished | None] = queue_module.SimpleQueue()
        """Finished slots: put by the loop, taken by the writer threads."""
        self.writers: list[threading.Thread] = []
        self._last_tidy = 0.0
        """On the loop only."""

    @property
    def capacity(self) -> int:
        return self.async_slots

    def accepts(self, job: Job) -> bool:
        """An ``async def`` job, when the loop runs."""
        return self.loop is not None and async_execution.is_async(job)

    def start(self) -> None:
        """Start the loop thread and the writer threads, if this process needs them."""
        if not self.async_slots:
            return
        loop = asyncio.new_event_loop()
        self._limit = asyncio.Semaphore(self.async_slots)
        ready = threading.Event()
        self.thread = threads.start(self._main, loop, ready, name="leasejobs-async")
        ready.wait()
        self.loop = loop
        for index in range(REPORTER_THREADS):
            self.writers.append(threads.start(self._writer, name=f"leasejobs-async-write-{index}"))

    def _main(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def submit(self, slot: Slot) -> None:
        """On the claim loop: start the job's task on the event loop."""
        assert self.loop is not None
        slot.is_async = True
        self.loop.call_soon_threadsafe(self._begin, slot)

    def _begin(self, slot: Slot) -> None:
        """On the loop: start the job's task and keep the means to cancel it on its slot."""
        assert self.loop is not None
        task = self.loop.create_task(self._run(slot))
        slot.cancel_handler = task.cancel
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self, slot: Slot) -> bool:
        """Cancel a slot's async handler, from any thread; False if there is no loop to ask.

        ``call_soon_threadsafe`` keeps order: a cancel asked after the job was handed over runs
        after its ``_begin``, so the task exists by then. A handler that already returned
        is not affected. The attempt ends failed with kind ``cancelled``, through the same fenced
        write as any result.
        """
        loop = self.loop
        if loop is None or loop.is_closed():
            return False
        try:
            loop.call_soon_threadsafe(_cancel, slot)
        except RuntimeError:  # the loop closed meanwhile: nothing runs there any more
            return False
        return True

    async def _run(self, slot: Slot) -> None:
        """One job on the loop: wait for the limit, run, tidy, hand the result over."""
        result: execution.Execution | None = None
        try:
            async with self._limit:
                # A stop now gives it the grace period; a stop or a cancel before, nothing to run.
                if slot.try_start() is not None:
                    began = time.monotonic()
                    result = await async_execution.execute(
                        slot.job,
                        self.worker_id,
                        slot.lease_lost,
                        cancellation=slot.cancellation,
                        on_start=self.watchdog.on_start(slot),
                    )
                    slot.duration = time.monotonic() - began
                    await self._tidy(result)
        except BaseException as exc:  # cancelled while waiting or tidying, or a bug here
            if isinstance(exc, asyncio.CancelledError):
                async_execution.uncancel()
            else:
                logger.exception("worker.async_error id=%s job=%s", self.worker_id, slot.token)
            # A result already made is kept; a released job's is never written.
            if result is None and slot.state is not SlotState.RELEASED:
                result = async_execution.interrupted(slot.job, self.worker_id, slot.lease_lost, exc)
        self._results.put((slot, result))

    async def _tidy(self, result: execution.Execution) -> None:
        now = time.monotonic()
        if result.ok and now - self._last_tidy < TIDY_EVERY:
            return
        self._last_tidy = now
        try:
            await async_execution.tidy_connections(self.keeper)
        except Exception:  # a closing error must not cost the job its result
            logger.exception("worker.async_tidy_error id=%s", self.worker_id)

    def _writer(self) -> None:
        """A writer thread: take finished async slots in batches and write their results."""
        self.keeper.adopt()
        try:
            while True:
                item = self.keeper.get(self._results)  # closes an idle one
                if item is None:
                    return
                batch = [item]
                while len(batch) < 500:
                    try:
                        item = self._results.get_nowait()
                    except queue_module.Empty:
                        break
                    if item is None:
                        self._results.put(None)  # for this thread's next get
                        break
                    batch.append(item)
                try:
                    self.writer.finished_many(batch)
                except BaseException:  # never lose a writer: the leases expire instead
                    logger.exception("worker.thread_error id=%s", self.worker_id)
                    for slot, _ in batch:  # each leaves flight (those not done with already)
                        self.watchdog.ended_returned(slot)
                self.wake.set()
        finally:
            connections.close_all()

    def shutdown(self) -> None:
        """At shutdown, after the release: cancel what still runs, stop the loop, join."""
        loop = self.loop
        if loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._drain(), loop)
        try:
            future.result(timeout=STOP_WAIT + 2.0)
        except Exception:  # a handler that will not stop: the loop is a daemon thread
            logger.warning("worker.async_stop_timeout id=%s", self.worker_id)
        loop.call_soon_threadsafe(loop.stop)
        if self.thread is not None:
            self.thread.join(timeout=STOP_WAIT)
        for _ in self.writers:
            self._results.put(None)
        for thread in self.writers:
            thread.join(timeout=STOP_WAIT)

    async def _drain(self) -> None:
        """Cancel every job task still running, give them ``STOP_WAIT``, close connections."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT)
        await asyncio.wait_for(async_execution.close_connections(), timeout=STOP_WAIT)


def _cancel(slot: Slot) -> None:
    """On the loop: cancel the slot's task if it has one and it still runs."""
    if slot.cancel_handler is not None:
        slot.cancel_handler()
