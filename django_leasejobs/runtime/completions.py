"""Grouped completions: successes wait in a list and complete in one statement.

A pool thread whose handler returned appends its slot here instead of writing; the claim loop
(and shutdown) flushes the list with one ``protocol.complete_many`` call, each row fenced by its
own attempt token, results included. A ``django.tasks`` task gets its ``task_finished`` signal
once the flush has decided its outcome.
"""

from __future__ import annotations

from django.db import Error as DatabaseError

from .. import protocol
from ..protocol import Outcome
from . import execution
from .worker_state import WorkerState


class GroupedCompletions(WorkerState):
    @staticmethod
    def _groupable(result: execution.Execution) -> bool:
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

    def _flush_completions(self) -> None:
        """Complete every successful job waiting in one statement (each row fenced by its token).

        On a commit-bound database one statement for many jobs is much cheaper than one each;
        the slots stay in flight (and count against concurrency) until this has run.
        """
        with self._completions_lock:
            slots, self._completions = self._completions, []
        if not slots:
            return
        try:
            outcomes = protocol.complete_many(
                [(*slot.token, slot.result) for slot in slots], finished_by=self.worker_id
            )
        except DatabaseError:
            with self._completions_lock:
                self._completions[:0] = slots  # fenced writes: safe to try again
            raise
        for slot in slots:
            outcome = outcomes.get(slot.job.pk, Outcome.STALE)
            if slot.execution is not None:
                execution.finished(slot.execution, outcome)
            self._count(slot, outcome)
        self._forget(slots)
