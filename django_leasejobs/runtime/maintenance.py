"""Maintenance, on the worker's main thread between claims, every ``poll`` seconds.

Lease recovery (every worker does it; guarded statements make that safe), the wake-up of jobs
deferred by workers that did not know their name or version (for those this worker runs), a
job-name pause carried to every name of the job this worker knows (``cover_aliases``), the
dashboard's per-minute sample (once a minute, by whichever worker gets there first:
:mod:`.samples`), pruning of long-lost workers' rows (once a lease), pruning of finished jobs by
``LEASEJOBS_RETENTION`` (by the worker holding the retention lease: :mod:`.retention`) and,
unless disabled, the scheduler (cron occurrences, then the ``maintenance`` callables).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence

from django.db import Error as DatabaseError

from .. import protocol, upkeep
from ..core import registry
from ..reports import samples
from ..upkeep import schedule_sync
from ..upkeep.retention import Retention
from . import attempt_ends, execution, schedules
from .deferred_names import DeferredNames
from .ledger import Ledger
from .options import WorkerOptions
from .outage import Outage, headline

logger = logging.getLogger("django_leasejobs")


class Maintenance:
    """The main thread's periodic work; all of its state is the main thread's alone."""

    def __init__(
        self,
        *,
        options: WorkerOptions,
        tasks: Sequence[Callable[[], object]],
        ledger: Ledger,
        outage: Outage,
    ) -> None:
        self.worker_id = options.worker_id
        self.lease = options.lease
        self.poll = options.poll
        self.scheduler = options.scheduler
        self.tasks = list(tasks)
        """The ``maintenance`` callables the scheduler step runs after the cron tick."""
        self.ledger = ledger
        self.outage = outage
        self.sampler = samples.Sampler()
        """When maintenance next writes the dashboard's per-minute sample (if no worker did)."""
        self.retention = Retention(options.worker_id)
        """Pruning by ``LEASEJOBS_RETENTION`` when this worker holds the retention lease."""
        self.partitions = upkeep.Partitions(options.worker_id)
        """History partitions made ahead (PostgreSQL) when this worker holds their lease."""
        self.deferred_names = DeferredNames()
        """Deferred jobs whose module this worker has not imported yet, for the wake-up."""
        self._next = 0.0
        self._next_worker_prune = 0.0

    def run(self) -> bool:
        """Every ``poll`` seconds: recover expired leases, sample, run the scheduler. False on DB
        error."""
        now = time.monotonic()
        if now < self._next:
            return True
        try:
            recovered = protocol.recover_expired()
            attempt_ends.recovered(recovered)  # task_finished for django.tasks tasks now dead
            self.ledger.count_recovered(recovered)
            if recovered:
                logger.info(
                    "worker.recovered id=%s jobs=%s", self.worker_id, ",".join(map(str, recovered))
                )
            self._wake_deferred()
            protocol.cover_aliases()  # a job is paused under every name this worker knows
            sampled = self.sampler.tick()
            if sampled:
                logger.debug("worker.sampled id=%s minute=%s", self.worker_id, sampled.isoformat())
            self._prune_workers(now)
            self._prune_by_retention()
            self._make_partitions()
            if self.scheduler:
                self._run_scheduler()
        except DatabaseError as exc:
            self.outage.error("maintenance", exc)
            return False
        self._next = now + self.poll
        return True

    def _wake_deferred(self) -> None:
        """Make due now the jobs other workers deferred because they did not know the name (or
        its version), for the names (aliases included) and versions this worker runs (one
        guarded statement: only delays a deferral set are cut short,
        ``protocol.wake_deferred``). Names whose module nothing imported yet are looked for at
        start and every few seconds (:mod:`.deferred_names`)."""
        found = self.deferred_names.import_waiting(time.monotonic())
        if found:
            logger.info("worker.imported_deferred id=%s names=%s", self.worker_id, ",".join(found))
        woken = protocol.wake_deferred(registry.runnable())
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
            deleted = self.retention.tick()
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

    def _make_partitions(self) -> None:
        """History partitions made ahead (PostgreSQL), when this worker holds their lease. A
        failure is logged and left to the next try, as retention's: a completion never needs
        a partition made (the DEFAULT one takes what no range covers)."""
        try:
            self.partitions.tick()
        except DatabaseError as exc:
            logger.warning(
                "worker.database_error id=%s where=history_partitions error=%s",
                self.worker_id,
                headline(exc),
            )
            execution.close_old_connections()

    def give_up_retention_lease(self) -> None:
        """At the end of the run: give up the retention lease if a walk was under way, and
        the history partitions' lease if held."""
        try:
            self.partitions.give_up_lease()
            self.retention.give_up_lease()
        except DatabaseError as exc:  # it expires on its own
            logger.warning(
                "worker.database_error id=%s where=retention error=%s",
                self.worker_id,
                headline(exc),
            )

    def sync_schedules(self) -> None:
        """Bring ``LEASEJOBS_SCHEDULES`` into the database before the first tick.

        Invalid settings raise ``ScheduleError`` and stop the start: a worker that silently ran
        without its schedules is the failure this app exists to prevent. A database outage is
        logged and the start goes on; the next ``syncschedules`` or worker start syncs.
        """
        try:
            schedule_sync.sync_from_settings()  # logs its one line, schedule.synced
        except DatabaseError as exc:
            self.outage.error("schedule sync", exc)

    def _run_scheduler(self) -> None:
        """The scheduler step, once per maintenance round (every ``poll`` s) when enabled.

        Emits due cron occurrences (``schedules.tick()``), then runs each callable of
        ``tasks``. Emission is insert-or-ignore on a unique (schedule, occurrence) key
        with a compare-and-set on the schedule's cursor, so every worker may run it at once
        without double-firing.
        """
        emitted = schedules.tick()
        if emitted:
            logger.info("worker.scheduled id=%s jobs=%s", self.worker_id, emitted)
        for task in self.tasks:
            try:
                task()
            except DatabaseError:
                raise  # waited out with backoff by the caller, like any database error
            except Exception:  # a broken schedule must not stop the worker running jobs
                logger.exception("worker.scheduler_error id=%s task=%r", self.worker_id, task)
