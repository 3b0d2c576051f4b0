"""A workflow step's transitions, made inside the fenced transaction that ends its job.

When a step's job succeeds, ends dead or is cancelled, the write that fenced it (its token,
or the operator's guard) calls ``job_ended`` before its transaction commits: the step's row
moves out of ``released`` (guarded by its job id, so only the step's latest job moves it), each
child's ``pending_parents`` is decremented by one guarded UPDATE, and a child whose counter
reached zero is released (its ``Job`` enqueued) by a second UPDATE guarded on ``waiting`` and
zero. The first UPDATE holds the child's row lock until commit, so of two parents ending at
once exactly one sees zero; a stale token changes no job row and never gets here. The run's
counters move by one UPDATE of its row; its status changes when ``steps_finished`` reaches
``steps_total``. Nothing counts the run's jobs.

Row locks are taken in one order (the job, its step, the children by id, the run) so two
parents ending together queue on the shared child instead of deadlocking.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, deque
from typing import Any

from django.db.models import F

from ..core import registry
from ..db.dbtime import DbNow
from ..errors import JobArgumentsError, JobValidationError, UnknownJobError
from ..models import (
    Job,
    Policy,
    RunStatus,
    Status,
    StepState,
    TakesResult,
    WorkflowEdge,
    WorkflowRun,
    WorkflowStep,
)
from . import dedupe
from .base import logger
from .enqueues import insert
from .new_rows import row_values

_ENDED_BY_JOB = {
    Status.SUCCEEDED: StepState.SUCCEEDED,
    Status.DEAD: StepState.FAILED,
    Status.CANCELLED: StepState.CANCELLED,
}


def job_ended(using: str, step_id: int | None, job_id: int, status: str) -> None:
    """The step's job ``job_id`` just became final (``status``), in the caller's transaction:
    move the step, enqueue or cancel its dependants, count it on its run."""
    if step_id is None:
        return
    state = _ENDED_BY_JOB[Status(status)]
    steps = WorkflowStep.objects.using(using)
    if not steps.filter(pk=step_id, job_id=job_id, state=StepState.RELEASED).update(
        state=state, finished_at=DbNow()
    ):
        return  # not its latest job (a replay's is), or moved already
    run_id = steps.filter(pk=step_id).values_list("run_id", flat=True).first()
    if run_id is not None:
        propagate(using, run_id, [(step_id, state)])


def propagate(using: str, run_id: int, ended: list[tuple[int, str]]) -> None:
    """Steps just ended (id, final state): apply each child's policy, enqueue the children
    left without a pending parent, and count every step that ended on the run."""
    counts: Counter[str] = Counter()
    todo = deque(ended)
    while todo:
        step_id, state = todo.popleft()
        counts[state] += 1
        children = (
            WorkflowEdge.objects.using(using)
            .filter(parent_id=step_id)
            .order_by("child_id")
            .values_list("child_id", "child__on_parent_failure")
            .select_for_update()
        )
        for child_id, policy in list(children):
            ended_as = parent_ended(using, child_id, policy, state)
            if ended_as is not None:
                todo.append((child_id, ended_as))
    count_ended(using, run_id, counts)


def parent_ended(using: str, child_id: int, policy: str, state: str) -> str | None:
    """One parent of the child ended in ``state``: one less pending, then the child's policy.
    The state the child itself ended in (failed: its job could not be made; cancelled: by its
    policy; skipped: an ``on_failure`` step none of whose parents failed), for the caller to
    propagate; None when it waits, was held or released."""
    child = WorkflowStep.objects.using(using).filter(pk=child_id)
    child.filter(pending_parents__gt=0).update(pending_parents=F("pending_parents") - 1)
    if state == StepState.SKIPPED:  # what waits on a step not needed is not needed either
        if child.filter(state=StepState.WAITING).update(
            state=StepState.SKIPPED, reason="a parent was skipped", finished_at=DbNow()
        ):
            return StepState.SKIPPED
        return None
    if policy == Policy.ON_FAILURE:
        if state != StepState.SUCCEEDED:  # the first failure enqueues it, once
            return enqueue_if_ready(using, child_id, child.filter(state=StepState.WAITING))
        if child.filter(state=StepState.WAITING, pending_parents=0).update(
            state=StepState.SKIPPED, reason="every parent succeeded", finished_at=DbNow()
        ):
            return StepState.SKIPPED
        return None
    if state == StepState.SUCCEEDED or policy == Policy.RUN:
        ready = child.filter(state=StepState.WAITING, pending_parents=0)
        return enqueue_if_ready(using, child_id, ready)
    reason = f"a parent ended {state}"
    if policy == Policy.CANCEL:
        if child.filter(state=StepState.WAITING).update(
            state=StepState.CANCELLED, reason=reason, finished_at=DbNow()
        ):
            return StepState.CANCELLED
        return None
    child.filter(state=StepState.WAITING).update(
        state=StepState.HELD, reason=f"{reason}: held for an operator"
    )
    return None


def enqueue_if_ready(using: str, child_id: int, ready: Any) -> str | None:
    """Move the child to ``released`` and enqueue its job if ``ready`` (its guarded rows) still
    matches: failed when its job could not be made."""
    if not ready.update(state=StepState.RELEASED, released_at=DbNow()):
        return None
    return StepState.FAILED if enqueue_step(using, child_id) else None


def count_ended(using: str, run_id: int, counts: Counter[str], sign: int = 1) -> None:
    """Add (or, re-armed, take back) steps ended on the run's counters; finish the run when
    every step has ended, or reopen it."""
    total = sum(counts.values())
    if not total:
        return
    runs = WorkflowRun.objects.using(using)
    run = runs.filter(pk=run_id)
    run.update(
        steps_finished=F("steps_finished") + sign * total,
        steps_succeeded=F("steps_succeeded") + sign * counts[StepState.SUCCEEDED],
        steps_failed=F("steps_failed") + sign * counts[StepState.FAILED],
        steps_cancelled=F("steps_cancelled") + sign * counts[StepState.CANCELLED],
    )
    if sign < 0:
        run.exclude(status=RunStatus.RUNNING).update(status=RunStatus.RUNNING, finished_at=None)
        return
    finish_if_done(using, run_id)


def finish_if_done(using: str, run_id: int) -> None:
    """The run's status, once its last step has ended (read under the run row's lock, which
    the caller's counter UPDATE took)."""
    runs = WorkflowRun.objects.using(using)
    row = (
        runs.filter(pk=run_id)
        .values(
            "steps_total",
            "steps_finished",
            "steps_failed",
            "steps_cancelled",
            "cancel_requested_at",
        )
        .first()
    )
    if row is None or row["steps_finished"] < row["steps_total"]:
        return
    if row["cancel_requested_at"] is not None:
        status = RunStatus.CANCELLED
    elif row["steps_failed"] or row["steps_cancelled"]:
        status = RunStatus.FAILED
    else:
        status = RunStatus.SUCCEEDED
    if runs.filter(pk=run_id, status=RunStatus.RUNNING).update(status=status, finished_at=DbNow()):
        logger.info("workflow.%s id=%s", status, run_id)


def enqueue_step(using: str, step_id: int, *, raise_errors: bool = False) -> bool:
    """Insert the job of a step just moved to ``released``, its parents' results bound to its
    leading placeholder. True when the job could not be made (its arguments no longer fit,
    its name is gone): the step is then failed, with the reason, and the caller propagates it
    (``raise_errors``: the error is raised instead, for an enqueue to refuse).
    """
    step = WorkflowStep.objects.using(using).get(pk=step_id)
    args = list(step.args)
    if step.takes_result != TakesResult.NONE:
        results = parent_results(using, step_id)
        bound = list(results.values())
        args.insert(0, bound[0] if step.takes_result == TakesResult.ONE and bound else bound)
    try:
        # Found as a worker finds a row's job: its module imported where allowed, for a
        # process enqueueing it that has not imported it yet (a shell, a worker new to it).
        registry.find(step.job_name)
        values = row_values(step.job_name, args, step.kwargs, **decode_options(step.options))
    except (JobValidationError, JobArgumentsError, UnknownJobError) as exc:
        if raise_errors:
            raise
        reason = f"Could not enqueue: {exc}"[:200]
        WorkflowStep.objects.using(using).filter(pk=step_id).update(
            state=StepState.FAILED, reason=reason, finished_at=DbNow()
        )
        logger.warning("workflow.step_failed id=%s step=%s reason=%s", step.run_id, step_id, reason)
        return True
    # A step is its own job: never deduplicated against another (its key would hand back a
    # job of another run, which this step could not follow).
    values.pop(dedupe.RULE, None)
    values["dedupe_key"] = values["live_dedupe_key"] = None
    values["workflow_step_id"] = step_id
    job = insert(values, using).job
    WorkflowStep.objects.using(using).filter(pk=step_id).update(job_id=job.pk)
    return False


def parent_results(using: str, step_id: int) -> dict[str, Any]:
    """The step's parents' results by step name, in ``after`` order (None for a parent that
    did not succeed, or whose job was pruned)."""
    parents = list(
        WorkflowEdge.objects.using(using)
        .filter(child_id=step_id)
        .order_by("position")
        .values_list("parent__name", "parent__job_id", "parent__state")
    )
    ids = [job_id for _, job_id, state in parents if state == StepState.SUCCEEDED and job_id]
    results = dict(Job.objects.using(using).filter(pk__in=ids).values_list("pk", "result"))
    return {name: results.get(job_id) for name, job_id, _ in parents}


def encode_options(options: dict[str, Any]) -> dict[str, Any]:
    """Enqueue options as JSON: ``run_at`` as ISO text, ``delay`` in seconds (counted from the
    step's enqueue)."""
    encoded = {key: value for key, value in options.items() if value is not None}
    if isinstance(encoded.get("run_at"), dt.datetime):
        encoded["run_at"] = encoded["run_at"].isoformat()
    if isinstance(encoded.get("delay"), dt.timedelta):
        encoded["delay"] = encoded["delay"].total_seconds()
    return encoded


def decode_options(options: dict[str, Any]) -> dict[str, Any]:
    decoded = dict(options)
    if isinstance(decoded.get("run_at"), str):
        decoded["run_at"] = dt.datetime.fromisoformat(decoded["run_at"])
    return decoded
