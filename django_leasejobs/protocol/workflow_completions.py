"""Successes of workflow jobs, written a worker's batch at a time.

A group's members finish by the thousand into one callback step and one run row. Written one
success per transaction, each held those two rows' locks until its commit, so two workers took
turns on them and the members drained at a small fraction of plain jobs' rate. Here a batch of
successes moves in one transaction: the dialect's ``complete_steps`` writes the jobs (fenced by
their tokens), their steps, one decrement per distinct child and one counter UPDATE per run
(one statement on PostgreSQL); what follows from a child left with no pending parent (its
release, or the skip of an ``on_failure`` step) and the runs that ended are settled here, as
``job_ended`` settles them for a death or a cancel, which stay one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from .. import dialects
from ..db.dbtime import DbNow
from ..db.deadlocks import retry_deadlocks
from ..dialects.base import Completion, StepsCompleted
from ..models import Job, Policy, StepState, WorkflowStep
from .workflow_steps import finish_if_done, propagate, released_if_ready


def complete_step_job(
    using: str,
    job_id: int,
    attempt: int,
    result: Any,
    finished_by: str = "",
    fields: dict[str, Any] | None = None,
) -> bool:
    """Complete one workflow job by its token and move its step, in one transaction (the
    caller's, inside a handler's ``ctx.complete()``); whether the token still owned the job.
    ``fields`` are more columns the success writes (upgraded arguments): written on the row
    just completed, in the same transaction."""
    with transaction.atomic(using=using):
        done = complete_step_jobs(using, [Completion(job_id, attempt, result)], finished_by)
        if done and fields:
            Job.objects.using(using).filter(pk=job_id, attempt=attempt).update(**fields)
    return bool(done)


@retry_deadlocks
def complete_step_jobs(
    using: str, completions: Sequence[Completion], finished_by: str = ""
) -> set[int]:
    """Complete the workflow jobs among ``completions`` still owned by their tokens, and
    move their steps and runs; the ids completed. Others (plain jobs, stale tokens) are left
    untouched."""
    with transaction.atomic(using=using):
        moved = dialects.for_alias(using).complete_steps(using, list(completions), finished_by)
        _settle(using, moved)
    return moved.jobs


def _settle(using: str, moved: StepsCompleted) -> None:
    """Release the children left with no pending parent (skip an ``on_failure`` one: every
    parent succeeded), propagate what that ended, and set the status of the runs that ended."""
    steps = WorkflowStep.objects.using(using)
    for child_id, run_id, policy in moved.ready:
        child = steps.filter(pk=child_id, state=StepState.WAITING, pending_parents=0)
        if policy == Policy.ON_FAILURE:
            if child.update(
                state=StepState.SKIPPED, reason="every parent succeeded", finished_at=DbNow()
            ):
                propagate(using, run_id, [(child_id, StepState.SKIPPED)])
            continue
        ended_as = released_if_ready(using, child_id, child)
        if ended_as is not None:
            propagate(using, run_id, [(child_id, ended_as)])
    for run_id in moved.finished_runs:
        finish_if_done(using, run_id)
