"""The claim loop, on the worker's main thread: claim, dispatch, flush, maintain, wait.

It claims when the free room reaches the low mark of :mod:`.claim_sizing` (for the free threads plus
a prefetch sized to the pool's pace), hands the jobs to the pool, and every ``poll`` seconds runs
maintenance: lease recovery (every worker does it; guarded statements make that safe), the wake-up
of jobs deferred by workers that did not know their name (for the names this worker registers), the
dashboard's per-minute sample (once a minute, by whichever worker gets there first:
:mod:`.samples`), pruning of long-lost workers' rows (once a lease), pruning of finished jobs by
``LEASEJOBS_RETENTION`` (by the worker holding the retention lease: :mod:`.retention`) and, unless
disabled, the scheduler.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable

from django.db import Error as DatabaseError

from .. import protocol, upkeep
from ..core import registry
from ..models import Job
from . import execution, schedule_settings, schedules
from .completions import GroupedCompletions
from .runtime_flush import RuntimeFlush
from .worker_state import Lane, Slot, headline

logger = logging.getLogger("django_leasejobs")

FLUSH_DELAY = 0.05
"""Longest wait of the loop while jobs are in flight: grouped completions are written at
least this often, whatever the claim's low mark says."""


class ClaimLoop(GroupedCompletions, RuntimeFlush):
    maintenance: list[Callable[[], object]]

    def _loop(self, burst: bool) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            execution.close_old_connections()
            if not self._maintain():
                continue
            try:
                self._flush_completions()
            except DatabaseError as exc:
                self._database_error("complete", exc)
                continue
            remaining = self._remaining()
            try:
                claimed, again = self._claim_lanes(remaining)
            except DatabaseError as exc:
                self._database_error("claim", exc)
                continue
            if remaining == 0 and not self.running:
                self._stop_reason = self._stop_reason or f"max_jobs={self.max_jobs} reached"
                return
            if burst and not claimed and not self.running:
                self._stop_reason = self._stop_reason or "burst: nothing due"
                return
            if again:
                continue  # more may be due and there is room: claim again at once
            # Completions waiting for a flush are written within FLUSH_DELAY even when no
            # thread frees enough room to wake this loop.
            self._wake.wait(FLUSH_DELAY if self.in_flight else self.poll)

    def _claim_lanes(self, remaining: int) -> tuple[int, bool]:
        """Claim for each lane with room, from its own queues (one lane, the worker's queues,
        unless queues have thread budgets). Returns the jobs claimed and whether a lane filled
        its claim and still has room (more may be due: claim again at once)."""
        claimed_in_all, again = 0, False
        for lane in self._lanes:
            left = remaining - claimed_in_all if self.max_jobs is not None else remaining
            want = min(self._claim_room(lane), left)
            if want <= 0:
                continue
            claimed = protocol.claim(
                self.worker_id, queues=lane.queues, batch=want, lease_seconds=self.lease
            )
            self._db_errors = 0
            if claimed:
                slots = [self._dispatch(job, lane) for job in claimed]
                self._async_recent = any(slot.is_async for slot in slots)
                claimed_in_all += len(claimed)
                again = again or (len(claimed) == want and self._claim_room(lane) > 0)
        return claimed_in_all, again

    def _remaining(self) -> int:
        """Jobs still allowed by ``max_jobs`` (a full batch when there is no such limit)."""
        if self.max_jobs is None:
            return self.batch
        return max(0, self.max_jobs - self.summary.claimed)

    def _dispatch(self, job: Job, lane: Lane) -> Slot:
        slot = Slot(job, lane)
        with self._in_flight_lock:
            self._in_flight[job.pk] = slot
        with self._summary_lock:
            self.summary.claimed += 1
        self._hand_over(slot)
        return slot

    def _maintain(self) -> bool:
        """Every ``poll`` seconds: recover expired leases, sample, run the scheduler. False on DB
        error."""
        now = time.monotonic()
        if now < self._next_maintenance:
            return True
        try:
            recovered = protocol.recover_expired()
            execution.recovered(recovered)  # task_finished for django.tasks tasks now dead
            self._count_recovered(recovered)
            if recovered:
                logger.info(
                    "worker.recovered id=%s jobs=%s", self.worker_id, ",".join(map(str, recovered))
                )
            self._wake_deferred()
            sampled = self._sampler.tick()
            if sampled:
                logger.debug("worker.sampled id=%s minute=%s", self.worker_id, sampled.isoformat())
            self._prune_workers(now)
            self._prune_by_retention()
            if self.scheduler:
                self._run_scheduler()
        except DatabaseError as exc:
            self._database_error("maintenance", exc)
            return False
        self._next_maintenance = now + self.poll
        return True

    def _wake_deferred(self) -> None:
        """Make due now the jobs other workers deferred because they did not know the name,
        for the names this worker registers (one guarded statement: only delays a deferral
        set are cut short, ``protocol.wake_deferred``)."""
        woken = protocol.wake_deferred(registry.registered())
        if woken:
            logger.info("worker.woke_deferred id=%s jobs=%s", self.worker_id, woken)

    def _prune_workers(self, now: float) -> None:
        """At most once a lease: delete the rows of workers not seen for many leases (killed
        ones; a clean stop deletes its own). Any worker may: the DELETE is by age alone.

        A failure is logged and left to the next lease, never to the maintenance's backoff:
        the rows are informational, and a worker whose table is missing (code deployed before
        ``migrate``) must go on running jobs.
        """
        if now < self._next_worker_prune:
            return
        self._next_worker_prune = now + self.lease
        try:
            upkeep.prune_workers(dt.timedelta(seconds=self.lease * upkeep.PRUNE_AFTER_LEASES))
        except DatabaseError as exc:
            logger.warning(
                "worker.database_error id=%s where=prune_workers error=%s",
                self.worker_id,
                headline(exc),
            )
            execution.close_old_connections()

    def _prune_by_retention(self) -> None:
        """A few batches of ``LEASEJOBS_RETENTION`` pruning, when this worker holds its lease.

        A failure is logged and the walk starts again at a later tick, never the maintenance's
        backoff: old rows can wait, claims must not (a lock timeout on one batch is no outage).
        """
        try:
            deleted = self._retention.tick()
        except DatabaseError as exc:
            logger.warning(
                "worker.database_error id=%s where=retention error=%s",
                self.worker_id,
                headline(exc),
            )
            execution.close_old_connections()
            return
        if deleted:
            logger.debug("worker.pruned id=%s jobs=%s", self.worker_id, deleted)

    def _release_retention(self) -> None:
        """At the end of the run: hand the retention lease back if a walk was under way."""
        try:
            self._retention.release()
        except DatabaseError as exc:  # it expires on its own
            logger.warning(
                "worker.database_error id=%s where=retention error=%s",
                self.worker_id,
                headline(exc),
            )

    def _sync_schedules(self) -> None:
        """Bring ``LEASEJOBS_SCHEDULES`` into the database before the first tick.

        Invalid settings raise ``ScheduleError`` and stop the start: a worker that silently ran
        without its schedules is the failure this app exists to prevent. A database outage is
        logged and the start goes on; the next ``syncschedules`` or worker start syncs.
        """
        try:
            schedule_settings.sync_from_settings()  # logs its one line, schedule.synced
        except DatabaseError as exc:
            self._database_error("schedule sync", exc)

    def _run_scheduler(self) -> None:
        """The scheduler step, once per maintenance round (every ``poll`` s) when enabled.

        Emits due cron occurrences (``schedules.tick()``), then runs each callable of
        ``self.maintenance``. Emission is insert-or-ignore on a unique (schedule, occurrence) key
        with a compare-and-set on the schedule's cursor, so every worker may run it at once
        without double-firing.
        """
        emitted = schedules.tick()
        if emitted:
            logger.info("worker.scheduled id=%s jobs=%s", self.worker_id, emitted)
        for task in self.maintenance:
            try:
                task()
            except DatabaseError:
                raise  # waited out with backoff by the caller, like any database error
            except Exception:  # a broken schedule must not stop the worker running jobs
                logger.exception("worker.scheduler_error id=%s task=%r", self.worker_id, task)
