"""The event loop: ``async def`` handlers run on one loop thread, the rest on the pool.

Sync and async jobs share everything but the thread that runs them: one claim, the same
in-flight slots (so one heartbeat renews both and sets ``lease_lost`` on both), the same
fenced writes. At most ``async_concurrency`` handlers run at once (an ``asyncio.Semaphore``);
a job claimed beyond that waits for it, leased and renewed like a sync job waiting for a thread.

The loop thread is started only when this process can meet an async handler
(``async_execution.possible()``: an async ``@job`` is registered, or the tasks backend is
configured). A project of sync jobs gets no extra thread and no extra claim capacity.

Reporting never blocks the loop: taking a finished slot out of the heartbeat goes through
``_gate``, which the heartbeat holds across a database statement, and a failure or a returned
value is a database write. So the loop only puts ``(slot, result)`` on a queue; two reporter
threads do exactly what a pool thread does after its handler: plain successes join the grouped
completions list (one statement per flush, by the claim loop), anything else goes through
``execution.report`` with the pool's retry on database errors. Threads of our own rather than
``run_in_executor``: their number is fixed, and each closes its connections when it stops.
"""

from __future__ import annotations

import asyncio
import logging
import queue as queue_module
import threading
import time

from django.db import connections

from . import async_execution, execution
from .pool import PoolThreads
from .worker_state import Slot

logger = logging.getLogger("django_leasejobs")

REPORTER_THREADS = 2
"""Threads writing async results; most results are plain successes, grouped by the claim loop."""

TIDY_EVERY = 1.0
"""Seconds between tidies of the async ORM thread's connection (and after every failed
attempt), rather than a thread hop around each job."""

STOP_WAIT = 1.0
"""Seconds the loop gives cancelled handlers to return when the worker stops."""

Finished = tuple[Slot, execution.Execution | None]


class AsyncRunner(PoolThreads):
    def _start_async(self) -> None:
        """Start the loop thread and the reporter threads, if this process needs them."""
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._async_thread: threading.Thread | None = None
        self._async_tasks: set[asyncio.Task[None]] = set()
        self._async_results: queue_module.SimpleQueue[Finished | None] = queue_module.SimpleQueue()
        self._reporters: list[threading.Thread] = []
        self._last_tidy = 0.0
        if not self._async_enabled:
            return
        loop = asyncio.new_event_loop()
        self._async_limit = asyncio.Semaphore(self.async_concurrency)
        ready = threading.Event()
        self._async_thread = threading.Thread(
            target=self._async_main, args=(loop, ready), name="leasejobs-async", daemon=True
        )
        self._async_thread.start()
        ready.wait()
        self._async_loop = loop
        for index in range(REPORTER_THREADS):
            thread = threading.Thread(
                target=self._reporter, name=f"leasejobs-async-report-{index}", daemon=True
            )
            thread.start()
            self._reporters.append(thread)

    def _async_main(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def _hand_over(self, slot: Slot) -> None:
        """On the claim loop: an async job goes to the event loop, any other to the pool."""
        loop = self._async_loop
        if loop is None or not async_execution.is_async(slot.job):
            super()._hand_over(slot)
            return
        slot.is_async = True
        with self._in_flight_lock:
            self._async_in_flight += 1
        loop.call_soon_threadsafe(self._begin_async, slot)

    def _begin_async(self, slot: Slot) -> None:
        """On the loop: start the job's task and keep the means to cancel it on its slot."""
        assert self._async_loop is not None
        task = self._async_loop.create_task(self._run_async(slot))
        slot.cancel_handler = task.cancel
        self._async_tasks.add(task)
        task.add_done_callback(self._async_tasks.discard)

    def _cancel_async(self, slot: Slot) -> bool:
        """Cancel a slot's async handler, from any thread; False if there is no loop to ask.

        ``call_soon_threadsafe`` keeps order: a cancel asked after the job was handed over runs
        after its ``_begin_async``, so the task exists by then. A handler that already returned
        is not affected. The attempt ends failed with kind ``cancelled``, through the same fenced
        report as any result.
        """
        loop = self._async_loop
        if loop is None or loop.is_closed():
            return False
        try:
            loop.call_soon_threadsafe(_cancel, slot)
        except RuntimeError:  # the loop closed meanwhile: nothing runs there any more
            return False
        return True

    async def _run_async(self, slot: Slot) -> None:
        """One job on the loop: wait for the limit, run, tidy, hand the result over."""
        result: execution.Execution | None = None
        try:
            async with self._async_limit:
                with slot.lock:  # a stop now gives it the grace period; a cancel, nothing to run
                    slot.started = not (slot.released or slot.ended_at is not None)
                if slot.started:
                    began = time.monotonic()
                    result = await async_execution.execute(
                        slot.job,
                        self.worker_id,
                        slot.lease_lost,
                        cancellation=slot.cancellation,
                        on_start=self._on_start(slot),
                    )
                    slot.duration = time.monotonic() - began
                    await self._tidy(result)
        except BaseException as exc:  # cancelled while waiting or tidying, or a bug here
            if isinstance(exc, asyncio.CancelledError):
                async_execution.uncancel()
            else:
                logger.exception("worker.async_error id=%s job=%s", self.worker_id, slot.token)
            if result is None and not slot.released:  # a result already made is kept
                result = async_execution.interrupted(slot.job, self.worker_id, slot.lease_lost, exc)
        self._async_results.put((slot, result))

    async def _tidy(self, result: execution.Execution) -> None:
        now = time.monotonic()
        if result.ok and now - self._last_tidy < TIDY_EVERY:
            return
        self._last_tidy = now
        try:
            await async_execution.tidy_connections(self.connection_keeper)
        except Exception:  # a closing error must not cost the job its result
            logger.exception("worker.async_tidy_error id=%s", self.worker_id)

    def _reporter(self) -> None:
        """A reporter thread: take finished async slots in batches and report them."""
        self.connection_keeper.adopt()
        try:
            while True:
                item = self.connection_keeper.get(self._async_results)  # closes an idle one
                if item is None:
                    return
                batch = [item]
                while len(batch) < 500:
                    try:
                        item = self._async_results.get_nowait()
                    except queue_module.Empty:
                        break
                    if item is None:
                        self._async_results.put(None)  # for this thread's next get
                        break
                    batch.append(item)
                try:
                    self._take_results(batch)
                except BaseException:  # never lose a reporter: the leases expire instead
                    logger.exception("worker.thread_error id=%s", self.worker_id)
                    self._forget([slot for slot, _ in batch])
                self._wake.set()
        finally:
            connections.close_all()

    def _take_results(self, batch: list[Finished]) -> None:
        """What a pool thread does after its handler, for many slots under one ``_gate``."""
        with self._gate:
            for slot, result in batch:
                with slot.lock:
                    if not slot.released and result is not None and slot.ended_at is None:
                        slot.reporting = True
        deferred: list[Slot] = []
        done: list[Slot] = []
        for slot, result in batch:
            if self._ended_returned(slot):
                self._refuse_late(slot)  # the watchdog ended it and cancelled its task
            elif not slot.reporting or result is None:
                done.append(slot)  # released at shutdown: never reported
            elif self._groupable(result):
                slot.execution = result
                deferred.append(slot)  # the claim loop's next flush completes and forgets it
            else:
                self._count(slot, self._report(result))
                self._forget([slot])
        if deferred:
            with self._completions_lock:
                self._completions.extend(deferred)
        self._forget(done)

    def _stop_async(self) -> None:
        """At shutdown, after the release: cancel what still runs, stop the loop, join."""
        loop = self._async_loop
        if loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._drain_async(), loop)
        try:
            future.result(timeout=STOP_WAIT + 2.0)
        except Exception:  # a handler that will not stop: the loop is a daemon thread
            logger.warning("worker.async_stop_timeout id=%s", self.worker_id)
        loop.call_soon_threadsafe(loop.stop)
        if self._async_thread is not None:
            self._async_thread.join(timeout=STOP_WAIT)
        for _ in self._reporters:
            self._async_results.put(None)
        for thread in self._reporters:
            thread.join(timeout=STOP_WAIT)

    async def _drain_async(self) -> None:
        """Cancel every job task still running, give them ``STOP_WAIT``, close connections."""
        tasks = list(self._async_tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT)
        await asyncio.wait_for(async_execution.close_connections(), timeout=STOP_WAIT)


def _cancel(slot: Slot) -> None:
    """On the loop: cancel the slot's task if it has one and it still runs."""
    if slot.cancel_handler is not None:
        slot.cancel_handler()
