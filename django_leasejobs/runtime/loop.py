"""The claim loop, on the worker's main thread: claim, dispatch, flush, maintain, wait.

It claims when the free room reaches the low mark of :mod:`.claim_sizing` (for the free threads
plus a prefetch sized to the pool's pace), hands each job to the executor that runs its kind
(the pool threads, or the event loop for an ``async def`` handler), writes the grouped
completions, and every ``poll`` seconds runs :mod:`.maintenance`.
"""

from __future__ import annotations

import logging
import time

from django.db import Error as DatabaseError

from .. import protocol
from ..models import Job
from . import execution, telemetry
from .claim_sizing import ClaimRoom
from .completions import Completer
from .control import Control
from .ledger import Ledger
from .maintenance import Maintenance
from .options import WorkerOptions
from .outage import Outage
from .pool import Executor
from .slots import InFlight, Lane, Slot

logger = logging.getLogger("django_leasejobs")

FLUSH_DELAY = 0.05
"""Longest wait of the loop while jobs are in flight: grouped completions are written at
least this often, whatever the claim's low mark says."""

BURST_RETRIES = 3
"""Empty claims in a row, ``FLUSH_DELAY`` apart, after which a ``--burst`` worker goes home
although jobs are due: concurrent claimers took every row its claims read (under load, a
claim's snapshot can be that far behind), or limits and pauses hold the due jobs back (they
may for an hour: not a reason to stay)."""


class ClaimLoop:
    """The main thread's loop. Its own state is the outage count (:class:`.Outage`),
    ``room.async_recent`` and ``empty_claims``, all written here alone."""

    def __init__(
        self,
        *,
        options: WorkerOptions,
        room: ClaimRoom,
        slots: InFlight,
        ledger: Ledger,
        completer: Completer,
        control: Control,
        outage: Outage,
        maintenance: Maintenance,
        pool: Executor,
        async_pool: Executor,
    ) -> None:
        self.options = options
        self.room = room
        self.slots = slots
        self.ledger = ledger
        self.completer = completer
        self.control = control
        self.outage = outage
        self.maintenance = maintenance
        self.pool = pool
        self.async_pool = async_pool
        """Tried first: it accepts only ``async def`` jobs, and only while its loop runs."""
        self.empty_claims = 0
        """A burst worker's empty claims in a row while it runs nothing (``_due_but_taken``)."""

    def run(self, burst: bool) -> None:
        """Until stopped, or (``burst``) until nothing is due and nothing runs, or ``max_jobs``."""
        control, slots = self.control, self.slots
        while not control.stopping.is_set():
            control.wake.clear()
            execution.close_old_connections()
            if not self.maintenance.run():
                continue
            try:
                self.completer.flush()
            except DatabaseError as exc:
                self.outage.error("complete", exc)
                continue
            remaining = self._remaining()
            try:
                claimed, again = self._claim_lanes(remaining)
            except DatabaseError as exc:
                self.outage.error("claim", exc)
                continue
            if remaining == 0 and not slots.running:
                control.reason = control.reason or f"max_jobs={self.options.max_jobs} reached"
                return
            if burst and not claimed and not slots.running:
                if self._due_but_taken():
                    control.wake.wait(FLUSH_DELAY)
                    continue
                control.reason = control.reason or "burst: nothing due"
                return
            self.empty_claims = 0
            if again:
                continue  # more may be due and there is room: claim again at once
            # Completions waiting for a flush are written within FLUSH_DELAY even when no
            # thread frees enough room to wake this loop.
            control.wake.wait(FLUSH_DELAY if slots.total else self.options.poll)

    def _claim_lanes(self, remaining: int) -> tuple[int, bool]:
        """Claim for each lane with room, from its own queues (one lane, the worker's queues,
        unless queues have thread budgets). Returns the jobs claimed and whether a lane filled
        its claim and still has room (more may be due: claim again at once)."""
        options, room = self.options, self.room
        claimed_in_all, again = 0, False
        for lane in room.lanes:
            left = remaining - claimed_in_all if options.max_jobs is not None else remaining
            want = min(room.wanted(lane), left)
            if want <= 0:
                continue
            started = time.monotonic()
            claimed = protocol.claim(
                options.worker_id, queues=lane.queues, batch=want, lease_seconds=options.lease
            )
            telemetry.claimed(
                options.worker_id, lane.name, len(claimed), time.monotonic() - started
            )
            self.outage.reset()
            if claimed:
                slots = [self._dispatch(job, lane) for job in claimed]
                room.async_recent = any(slot.is_async for slot in slots)
                claimed_in_all += len(claimed)
                again = again or (len(claimed) == want and room.wanted(lane) > 0)
        return claimed_in_all, again

    def _due_but_taken(self) -> bool:
        """A burst worker's empty claim while jobs are due: true for ``BURST_RETRIES`` passes
        in a row (one probe each), then false."""
        self.empty_claims += 1
        if self.empty_claims > BURST_RETRIES:
            return False
        try:
            return protocol.anything_due(self.options.queues)
        except DatabaseError as exc:
            self.outage.error("claim", exc)
            return True

    def _remaining(self) -> int:
        """Jobs still allowed by ``max_jobs`` (a full batch when there is no such limit)."""
        if self.options.max_jobs is None:
            return self.options.batch
        return max(0, self.options.max_jobs - self.ledger.summary.claimed)

    def _dispatch(self, job: Job, lane: Lane) -> Slot:
        slot = Slot(job, lane)
        self.slots.add(slot)
        self.ledger.claimed()
        if self.async_pool.accepts(job):
            self.async_pool.submit(slot)
        else:
            self.pool.submit(slot)
        return slot
