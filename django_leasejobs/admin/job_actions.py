"""The job admin's actions on one job: cancel, run now, retry now, each with the permission it
needs and the states it applies to. They call the lease protocol, which decides."""

from __future__ import annotations

from collections.abc import Callable

from .. import protocol
from ..models import CLAIMABLE, Job, Status


class JobAction:
    """One operator action on a job: who may do it, from which states, and what it calls."""

    def __init__(
        self,
        slug: str,
        label: str,
        permission: str,
        states: tuple[str, ...],
        call: Callable[[int], bool | str],
        done: str,
        shown_for: tuple[str, ...] | None = None,
    ) -> None:
        self.slug, self.label, self.permission = slug, label, permission
        self.states, self.call, self.done = states, call, done
        self.shown_for = shown_for or states
        """States in which the detail page shows the button (a subset of ``states``)."""

    def apply(self, job_id: int) -> str | None:
        """Call it: what was done, as a message ("Cancelled", "Cancel requested"), or None when
        the job's state refused it."""
        result = self.call(job_id)
        if isinstance(result, str):
            return result
        return self.done if result else None

    def refusal(self, job: Job) -> str:
        allowed = " or ".join(self.states)
        return f"Job #{job.pk} is {job.status}: only {allowed} jobs can be {self.done.lower()}."


CANCEL_REQUESTED = "Cancel requested"


def cancel(job_id: int) -> bool | str:
    """A waiting job is cancelled; a running one's worker is asked to end it (it may still
    complete first: the attempt's own token decides)."""
    outcome = protocol.request_cancel(job_id)
    if outcome is protocol.Cancel.REQUESTED:
        return CANCEL_REQUESTED
    return outcome is protocol.Cancel.CANCELLED


JOB_ACTIONS = {
    action.slug: action
    for action in (
        JobAction("cancel", "Cancel", "cancel", (*CLAIMABLE, Status.RUNNING), cancel, "Cancelled"),
        JobAction(
            "run-now",
            "Run now",
            "run_now",
            tuple(CLAIMABLE),
            protocol.run_now,
            "Made due now",
            shown_for=(Status.PENDING,),
        ),
        JobAction(
            "retry", "Retry now", "run_now", (Status.FAILED,), protocol.retry_now, "Retried now"
        ),
    )
}
"""Run now is shown for pending jobs, retry for failed ones; both make the job due at once."""
