"""Successes of workflow jobs, written a worker's batch at a time.

A group's members finish by the thousand into one callback step and one run row. Written one
success per transaction, each held those two rows' locks until its commit, so two workers took
turns on them and the members drained at a small fraction of plain jobs' rate. Here a batch of
successes moves in one transaction: the jobs (locked in id order, each write fenced by its
token), their steps, one decrement per distinct child by the number of its parents in the
batch, and one counter UPDATE per run. Locks are taken in the order ``job_ended`` takes them
(jobs, steps, children by id, then the run), so the two paths queue instead of deadlocking.
Deaths and cancels stay one at a time (``workflow_steps.job_ended``): they are rare, and their
policies fan out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest

from ..db.dbtime import DbNow
from ..db.deadlocks import retry_deadlocks
from ..dialects.base import Completion, Token, succeeded_fields, tokens_q
from ..models import Job, Policy, Status, StepState, WorkflowEdge, WorkflowStep
from .base import announce_finished
from .workflow_steps import count_ended, propagate, released_if_ready


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
    ``fields`` are more columns the success writes (upgraded arguments)."""
    done = complete_step_jobs(using, [Completion(job_id, attempt, result)], finished_by, fields)
    return bool(done)


@retry_deadlocks
def complete_step_jobs(
    using: str,
    completions: Sequence[Completion],
    finished_by: str = "",
    fields: dict[str, Any] | None = None,
) -> set[int]:
    """Complete the workflow jobs among ``completions`` still owned by their tokens, and
    move their steps and runs; the ids completed. Others (plain jobs, stale tokens) are left
    untouched."""
    wanted = {c.id: c for c in completions}
    with transaction.atomic(using=using):
        rows = (
            Job.objects.using(using)
            .select_for_update()
            .filter(pk__in=sorted(wanted), status=Status.RUNNING, workflow_step__isnull=False)
            .order_by("pk")
            .values_list("pk", "attempt", "workflow_step_id")
        )
        owned = {pk: step for pk, attempt, step in rows if attempt == wanted[pk].attempt}
        if not owned:
            return set()
        _write_successes(using, [wanted[pk] for pk in owned], finished_by, fields)
        announce_finished(using, list(owned))
        steps_succeeded(using, owned)
    return set(owned)


def _write_successes(
    using: str, done: list[Completion], finished_by: str, fields: dict[str, Any] | None
) -> None:
    """The fenced success writes: one statement for the rows without a result, one per row
    with one (a chain's steps pass results on; a group's no-op members return none)."""
    jobs = Job.objects.using(using).filter(status=Status.RUNNING)
    bare = [Token(c.id, c.attempt) for c in done if c.result is None]
    if bare:
        jobs.filter(tokens_q(bare)).update(**succeeded_fields(None, finished_by), **(fields or {}))
    for c in done:
        if c.result is not None:
            jobs.filter(pk=c.id, attempt=c.attempt).update(
                **succeeded_fields(c.result, finished_by), **(fields or {})
            )


def steps_succeeded(using: str, owned: dict[int, int]) -> None:
    """The steps of jobs just succeeded (job id to step id) leave ``released``; each run's
    children and counters move once for all of its steps here. A step whose latest job is
    another (a replay's) does not move."""
    steps = WorkflowStep.objects.using(using)
    rows = (
        steps.select_for_update()
        .filter(pk__in=sorted(set(owned.values())), state=StepState.RELEASED)
        .order_by("pk")
        .values_list("pk", "job_id", "run_id")
    )
    by_run: defaultdict[int, list[int]] = defaultdict(list)
    for step_id, job_id, run_id in rows:
        if owned.get(job_id) == step_id:
            by_run[run_id].append(step_id)
    moved = [step_id for ids in by_run.values() for step_id in ids]
    if not moved:
        return
    steps.filter(pk__in=moved).update(state=StepState.SUCCEEDED, finished_at=DbNow())
    for run_id in sorted(by_run):
        _parents_succeeded(using, run_id, by_run[run_id])


def _parents_succeeded(using: str, run_id: int, parent_ids: list[int]) -> None:
    """Parents of one run just succeeded: each child loses that many pending parents in one
    UPDATE (in id order), and is released, or skipped, as ``parent_ended`` would."""
    edges = (
        WorkflowEdge.objects.using(using)
        .filter(parent_id__in=parent_ids)
        .values_list("child_id", "child__on_parent_failure")
    )
    ended: Counter[int] = Counter()
    policies: dict[int, str] = {}
    for child_id, policy in edges:
        ended[child_id] += 1
        policies[child_id] = policy
    follow: list[tuple[int, str]] = []
    steps = WorkflowStep.objects.using(using)
    for child_id in sorted(ended):
        child = steps.filter(pk=child_id)
        child.update(pending_parents=Greatest(F("pending_parents") - ended[child_id], Value(0)))
        if policies[child_id] == Policy.ON_FAILURE:
            if child.filter(state=StepState.WAITING, pending_parents=0).update(
                state=StepState.SKIPPED, reason="every parent succeeded", finished_at=DbNow()
            ):
                follow.append((child_id, StepState.SKIPPED))
            continue
        ended_as = released_if_ready(
            using, child_id, child.filter(state=StepState.WAITING, pending_parents=0)
        )
        if ended_as is not None:
            follow.append((child_id, ended_as))
    counts: Counter[str] = Counter({StepState.SUCCEEDED: len(parent_ids)})
    if follow:
        propagate(using, run_id, follow, counted=counts)
    else:
        count_ended(using, run_id, counts)
