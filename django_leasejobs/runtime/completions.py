"""Grouped completions: successes wait in a list and complete in one statement.

A runner whose handler returned a plain success adds its slot here instead of writing; the claim
loop (and shutdown) flushes the list with one ``protocol.complete_many`` call, each row fenced
by its own attempt token, results included. A ``django.tasks`` task gets its ``task_finished``
signal once the flush has decided its outcome.
"""

from __future__ import annotations

import threading

from django.db import Error as DatabaseError

from .. import protocol
from ..protocol import Outcome
from . import execution
from .ledger import Ledger
from .slots import InFlight, Lane, Slot


class Completer:
    """The successes waiting for the next flush.

    ``_pending`` is appended to by the pool and reporter threads and taken whole by the main
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
        write stores them: ``execution.report``).
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
        """Complete every successful job waiting in one statement (each row fenced by its token);
        a workflow's jobs in a second one, with their steps.

        On a commit-bound database one statement for many jobs is much cheaper than one each;
        the slots stay in flight (and count against concurrency) until this has run.
        """
        with self._lock:
            slots, self._pending = self._pending, []
        plain = [slot for slot in slots if slot.job.workflow_step_id is None]
        steps = [slot for slot in slots if slot.job.workflow_step_id is not None]
        for part, workflow_jobs in ((plain, False), (steps, True)):
            if not part:
                continue
            try:
                outcomes = protocol.complete_many(
                    [(*slot.token, slot.result) for slot in part],
                    finished_by=self.worker_id,
                    workflow_jobs=workflow_jobs,
                )
            except DatabaseError:
                untried = part + steps if part is plain else part
                with self._lock:
                    # One write per part, one transaction each: nothing of this part
                    # was written, and fenced writes are safe to try again.
                    self._pending[:0] = untried
                raise
            self._finished(part, outcomes)

    def _finished(self, slots: list[Slot], outcomes: dict[int, Outcome]) -> None:
        for slot in slots:
            outcome = outcomes.get(slot.job.pk, Outcome.STALE)
            if slot.execution is not None:
                execution.finished(slot.execution, outcome)
            self.ledger.count(slot, outcome)
        self.slots.completed(slots)
