"""Grouped completions: successes wait in a list and complete in one statement.

A runner whose handler returned a plain success adds its slot here instead of writing; the claim
loop (and shutdown) flushes the list with one ``protocol.complete_many`` call, each row fenced
by its own attempt token, results included. A ``django.tasks`` task gets its ``task_finished``
signal once the flush has decided its outcome; the batch's logs are written with it, in the
same statement or transaction (:mod:`.job_logs`).
"""

from __future__ import annotations

import threading

from django.db import Error as DatabaseError

from .. import protocol
from ..protocol import Outcome
from . import attempt_ends, execution, job_logs, telemetry
from .ledger import Ledger
from .slots import InFlight, Lane, Slot


class Completer:
    """The successes waiting for the next flush.

    ``_pending`` is appended to by the pool and writer threads and taken whole by the main
    thread (the claim loop, then shutdown), always under ``_lock``; its length is read without
    it by the claim sizing (a count one job old moves a claim by one turn).
    """

    def __init__(self, worker_id: str, slots: InFlight, ledger: Ledger) -> None:
        self.worker_id = worker_id
        self.slots = slots
        self.ledger = ledger
        self._pending: list[Slot] = []
        self._lock = threading.Lock()

    @staticmethod
    def groupable(result: execution.Execution) -> bool:
        """A success not yet written: its completion can share one statement with others.

        Not one the handler completed itself (``ctx.complete()``), nor one whose lease was
        lost (nothing is written for it), nor one whose arguments were upgraded (its success
        write stores them: ``attempt_ends.write_result``).
        """
        context = result.context
        return (
            result.ok
            and not context.completed
            and not context.lease_lost
            and result.upgraded is None
        )

    def add(self, slots: list[Slot]) -> None:
        """Queue successes (their ``execution`` set, grouped by ``Slot.try_group``) for the
        next flush, which settles them."""
        with self._lock:
            self._pending.extend(slots)

    def waiting(self, lane: Lane | None = None) -> int:
        """Successes waiting for the flush (of ``lane`` alone, if given)."""
        if lane is None:
            return len(self._pending)
        with self._lock:
            return sum(1 for slot in self._pending if slot.lane is lane)

    def flush(self) -> None:
        """Complete every successful job waiting in one call (each row fenced by its token):
        plain jobs in one statement, a workflow's with their steps, all or nothing.

        On a commit-bound database one statement for many jobs is much cheaper than one each;
        the slots stay in flight (and count against concurrency) until this has run.
        """
        with self._lock:
            slots, self._pending = self._pending, []
        if not slots:
            return
        try:
            outcomes = self._complete(slots)
        except DatabaseError:
            with self._lock:
                # Nothing of the batch was written, and fenced writes are safe to try again.
                self._pending[:0] = slots
            raise
        self._finished(slots, outcomes)

    def _complete(self, slots: list[Slot]) -> dict[int, Outcome]:
        """The batch's completion with its logs. A batch that logged nothing is one statement in
        autocommit (a transaction would cost two round trips more); first attempts' logs ride
        in the completion itself (on PostgreSQL, its statement). Logs needing the job's cap, or
        refused there, go in the batch's transaction behind a savepoint: a refused insert loses
        them (logged), never the completions."""
        items = [(*slot.token, slot.result) for slot in slots]
        ended = [
            (slot.execution, Outcome.SUCCEEDED)
            for slot in slots
            if slot.execution is not None and job_logs.logged(slot.execution)
        ]
        if not ended:
            return protocol.complete_many(items, finished_by=self.worker_id)
        rows = job_logs.rows_of(ended)
        if job_logs.uncapped(rows):
            try:
                return protocol.complete_many(items, finished_by=self.worker_id, logs=rows)
            except DatabaseError:
                pass  # nothing of the batch was written: again, with the logs apart
        return protocol.complete_many(
            items,
            finished_by=self.worker_id,
            then=lambda done: job_logs.store([row for row in rows if row.job_id in done]),
        )

    def _finished(self, slots: list[Slot], outcomes: dict[int, Outcome]) -> None:
        for slot in slots:
            outcome = outcomes.get(slot.job.pk, Outcome.STALE)
            if slot.execution is not None:
                attempt_ends.finished(slot.execution, outcome)
                telemetry.refused(slot.execution, outcome)
            self.ledger.count(slot, outcome)
        self.slots.completed(slots)
