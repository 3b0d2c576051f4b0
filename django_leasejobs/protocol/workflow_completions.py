"""Successes of workflow jobs, written a worker's batch at a time, and the rules they follow.

A group's members finish by the thousand into one callback step and one run row. Written one
success per transaction, each held those two rows' locks until its commit, so two workers took
turns on them and the members drained at a small fraction of plain jobs' rate. Here a batch of
successes moves in one transaction, in the order every workflow transition takes its locks:

1. the jobs, then their steps (``Dialect.complete_steps``: each job fenced by its token, each
   step guarded by ``released`` and its latest job);
2. the children, by id: the protocol reads the moved steps' edges (after locking the steps, so
   an edge that ``add_steps`` committed meanwhile is seen) and decides how many parents each
   child loses. A child that itself ended in the batch is not counted down: it is a released
   ``on_failure`` step whose parent failed earlier, it has started, and its count no longer
   matters;
3. the runs, by id: each counts its steps succeeded (``Dialect.count_steps`` applies the
   counts it is given, the children then the runs). When children are left with no pending
   parent, the runs are counted only after those children are released (or skipped): an
   enqueue looks its job up in the registry, which may import the job's module, and that
   happens with no run's row locked; the modules are looked up before the first enqueue.

What follows from a child left with no pending parent (its enqueue, or the skip of an
``on_failure`` step) and the runs that ended are settled here, as ``job_ended`` settles them
for a death or a cancel, which stay one at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from .. import dialects
from ..core import registry
from ..db.dbtime import DbNow
from ..dialects import Completion
from ..errors import UnknownJobError
from ..models import Job, Policy, StepState, WorkflowEdge, WorkflowStep
from .workflow_steps import enqueue_if_ready, finish_if_done, propagate


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


def complete_step_jobs(
    using: str, completions: Sequence[Completion], finished_by: str = ""
) -> set[int]:
    """Complete the workflow jobs among ``completions`` still owned by their tokens, and
    move their steps and runs; the ids completed. Others (plain jobs, stale tokens) are left
    untouched. The locks are taken in one order (see the module's docstring), so batches
    and one-at-a-time ends queue on a shared row instead of deadlocking."""
    dialect = dialects.for_alias(using)
    with transaction.atomic(using=using):
        moved = dialect.complete_steps(using, list(completions), finished_by)
        if not moved.moved:
            return moved.jobs
        children, runs = counts(using, moved.moved)
        counted = dialect.count_steps(using, children, runs)
        if not counted.counted:
            _settle(using, counted.ready)
            counted = dialect.count_steps(using, {}, runs)
        for run_id in counted.finished_runs:
            finish_if_done(using, run_id)
    return moved.jobs


def counts(using: str, moved: dict[int, int]) -> tuple[dict[int, int], dict[int, int]]:
    """The parents each child loses and the steps each run counts, for the steps ``moved``
    to ``succeeded`` (step id to run id). Read after those steps are locked."""
    edges = (
        WorkflowEdge.objects.using(using)
        .filter(parent_id__in=sorted(moved))
        .values_list("child_id", flat=True)
    )
    children = Counter(child for child in edges if child not in moved)  # started already
    return dict(children), dict(Counter(moved.values()))


def _settle(using: str, ready: list[tuple[int, int, str]]) -> None:
    """Release the children left with no pending parent (skip an ``on_failure`` one: every
    parent succeeded), and propagate what that ended."""
    _look_up_jobs(using, [child_id for child_id, _, policy in ready if policy != Policy.ON_FAILURE])
    steps = WorkflowStep.objects.using(using)
    for child_id, run_id, policy in ready:
        child = steps.filter(pk=child_id, state=StepState.WAITING, pending_parents=0)
        if policy == Policy.ON_FAILURE:
            if child.update(
                state=StepState.SKIPPED, reason="every parent succeeded", finished_at=DbNow()
            ):
                propagate(using, run_id, [(child_id, StepState.SKIPPED)])
            continue
        ended_as = enqueue_if_ready(using, child_id, child)
        if ended_as is not None:
            propagate(using, run_id, [(child_id, ended_as)])


def _look_up_jobs(using: str, step_ids: list[int]) -> None:
    """Find the jobs of the steps about to be released in the registry (importing their
    modules where allowed) before any of them is: the first enqueue may count a failed one
    on its run, and no module is imported while a run's row is locked. A name still unknown
    fails its step at its enqueue, which says why."""
    names = WorkflowStep.objects.using(using).filter(pk__in=step_ids).values_list("job_name")
    for (name,) in set(names):
        try:
            registry.find(name)
        except UnknownJobError:
            continue
