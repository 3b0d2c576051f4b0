"""Shutdown: stop claiming, let in-flight jobs finish within ``grace``, release the rest.

Prefetched jobs (claimed, waiting for a busy runner) are handed back at once; running ones get
the grace period, their grouped completions still written; then the LISTEN thread and the
watchdog stop, what is left is released, and the runners and the heartbeat are joined. A
released job is claimable again at once by another worker, and the heartbeat thread, as it
stops, takes the worker's row out of the table of live workers.
"""

from __future__ import annotations

import logging
import time

from django.db import Error as DatabaseError

from .. import protocol
from . import execution
from .completions import Completer
from .control import Control
from .heartbeat import Heartbeat
from .ledger import Ledger
from .outage import Outage, headline
from .pool import Executor
from .slots import InFlight, Lane, Slot, SlotState
from .wakeup import Wakeup
from .watchdog import Watchdog

logger = logging.getLogger("django_leasejobs")


class Shutdown:
    """The main thread's last step of a run (it keeps no state of its own)."""

    def __init__(
        self,
        *,
        control: Control,
        slots: InFlight,
        lanes: list[Lane],
        completer: Completer,
        ledger: Ledger,
        outage: Outage,
        wakeup: Wakeup,
        watchdog: Watchdog,
        pool: Executor,
        async_pool: Executor,
        heartbeat: Heartbeat,
    ) -> None:
        self.control = control
        self.slots = slots
        self.lanes = lanes
        self.completer = completer
        self.ledger = ledger
        self.outage = outage
        self.wakeup = wakeup
        self.watchdog = watchdog
        self.pool = pool
        self.async_pool = async_pool
        self.heartbeat = heartbeat

    def run(self) -> None:
        """Stop claiming, wait up to ``grace`` for in-flight jobs, release the rest, join."""
        control = self.control
        control.stopping.set()
        self._release(self._prefetched())
        deadline = (control.stop_at or time.monotonic()) + control.grace
        self._say_what_stop_waits_for(deadline)
        # Attempts the worker already ended (timeouts, cancels) are not waited for: their
        # handlers may never return, and nothing of theirs will be written.
        while self.slots.running and time.monotonic() < deadline:
            control.wake.clear()
            try:
                self.completer.flush()
            except DatabaseError as exc:
                # stopping is set, so wait here, not in Outage.error, and not past the grace.
                self.outage.error("complete", exc, wait=False)
                time.sleep(min(self.outage.backoff(), max(0.0, deadline - time.monotonic())))
            control.wake.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        self.wakeup.stop()
        self.watchdog.stop()
        self._release(self.slots.live())
        control.abandon.set()
        self.async_pool.shutdown()  # cancels the async handlers just released, stops the loop
        self.heartbeat.signal_stop()
        self.pool.shutdown()
        self.heartbeat.join()
        execution.close_old_connections()

    def _say_what_stop_waits_for(self, deadline: float) -> None:
        """Say at once, on the console, what the stop waits for and for how long (a worker
        silent for its grace looks hung, and gets killed)."""
        console = self.ledger.console
        running = sorted(slot.job.pk for slot in self.slots.live())
        if console is not None and running:
            console.stopping(self.control.reason, max(0.0, deadline - time.monotonic()), running)

    def _prefetched(self) -> list[Slot]:
        """Claimed jobs that would wait for a busy thread (or a full async limit): at a stop
        they are handed back at once. Those an idle thread is about to take start and get the
        grace period like the running ones."""
        waiting: list[Slot] = []
        slots, ended = self.slots.snapshot()  # ended: handlers still running, ended by the worker
        # Async slots share the event loop's limit; sync ones each lane's threads.
        rooms: dict[Lane | None, int] = {None: self.async_pool.capacity}
        rooms.update((lane, lane.threads) for lane in self.lanes)
        for group, room in rooms.items():
            mine = [slot for slot in slots if self._group(slot) is group]
            queued = [slot for slot in mine if slot.state is SlotState.QUEUED]
            busy = len(mine) - len(queued)
            busy += sum(1 for slot in ended if self._group(slot) is group)
            idle = max(0, room - busy)
            waiting += queued[idle:]
        return waiting

    def _group(self, slot: Slot) -> Lane | None:
        """What a slot waits for: the event loop (``None``) or its lane's threads."""
        return None if slot.is_async else (slot.lane or self.lanes[0])

    def _release(self, slots: list[Slot]) -> None:
        """Hand back these jobs, but those already being written, released or ended."""
        for slot in slots:
            if self.slots.release(slot) is None:
                continue
            slot.lease_lost.set()  # a cooperative handler stops; its result is never written
            try:
                outcome = protocol.release(*slot.token)
            except DatabaseError as exc:
                logger.warning(
                    "worker.database_error id=%s where=release job=%s error=%s "
                    "(the lease will expire instead)",
                    self.control.worker_id,
                    slot.job.pk,
                    headline(exc),
                )
                execution.close_old_connections()
                continue
            self.ledger.count(slot, outcome, ran=False)
