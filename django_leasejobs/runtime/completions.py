"""Grouped completions: plain successes wait in a list and complete in one statement.

A pool thread that ran a handler returning nothing appends its slot here instead of writing;
the claim loop (and shutdown) flushes the list with one ``protocol.complete_many`` call, each
row fenced by its own attempt token.
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
        """A plain success with no return value: its completion can share one statement.

        Not a ``django.tasks`` task: it reports through ``execution.report``, which sends its
        ``task_finished`` signal.
        """
        context = result.context
        return (
            result.ok
            and result.result is None
            and result.task is None
            and not context.completed
            and not context.lease_lost
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
                [slot.token for slot in slots], finished_by=self.worker_id
            )
        except DatabaseError:
            with self._completions_lock:
                self._completions[:0] = slots  # fenced writes: safe to try again
            raise
        for slot in slots:
            self._count(slot, outcomes.get(slot.job.pk, Outcome.STALE))
        with self._in_flight_lock:
            for slot in slots:
                self._in_flight.pop(slot.job.pk, None)
