"""The operations ``complete_steps`` and ``count_steps`` with the ORM: a worker's batch of
workflow successes.

A group's members finish by the thousand into one callback step and one run row; written one
success per transaction, each held those rows' locks until its commit and the members drained
at a small fraction of plain jobs' rate. A batch moves in one transaction of the protocol's
(``protocol.workflow_completions``, which states the rules): ``complete_steps`` writes the jobs
(locked in id order, each write fenced by its token) and moves their steps (guarded by
``released`` and their latest job); ``count_steps`` applies the counts the protocol computed:
one UPDATE per child, in id order, then one per run, in id order (each UPDATE one row, so the
order is the statements' own, not a plan's), the runs only when no child was left ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db.models import F, Value
from django.db.models.functions import Greatest

from ...db.dbtime import DbNow
from ...models import Job, Status, StepState, WorkflowRun, WorkflowStep
from ..tokens import Completion, Token, succeeded_fields, tokens_q


class StepsCompleted(NamedTuple):
    """What ``complete_steps`` did: the workflow jobs it completed, and the steps it moved
    to ``succeeded`` (step id to run id)."""

    jobs: set[int]
    moved: dict[int, int]


class Counted(NamedTuple):
    """What ``count_steps`` did: the children left with no pending parent and still waiting
    (id, run id, policy), the runs whose every step has ended (their status is the
    protocol's to set), and whether the runs were counted (not when a child was left ready)."""

    ready: list[tuple[int, int, str]]
    finished_runs: list[int]
    counted: bool


def complete_steps(
    alias: str, completions: Sequence[Completion], finished_by: str
) -> StepsCompleted:
    """The ORM's ``complete_steps``, in the caller's transaction (its row locks last until
    the caller commits)."""
    wanted = {c.id: c for c in completions}
    rows = (
        Job.objects.using(alias)
        .select_for_update()
        .filter(pk__in=sorted(wanted), status=Status.RUNNING, workflow_step__isnull=False)
        .order_by("pk")
        .values_list("pk", "attempt", "workflow_step_id")
    )
    owned = {pk: step for pk, attempt, step in rows if attempt == wanted[pk].attempt}
    if not owned:
        return StepsCompleted(set(), {})
    _write_successes(alias, [wanted[pk] for pk in owned], finished_by)
    return StepsCompleted(set(owned), _move_steps(alias, owned))


def _write_successes(alias: str, done: list[Completion], finished_by: str) -> None:
    """The fenced success writes: one statement for the rows without a result, one per row
    with one (a chain's steps pass results on; a group's no-op members return none)."""
    jobs = Job.objects.using(alias).filter(status=Status.RUNNING)
    bare = [Token(c.id, c.attempt) for c in done if c.result is None]
    if bare:
        jobs.filter(tokens_q(bare)).update(**succeeded_fields(None, finished_by))
    for c in done:
        if c.result is not None:
            jobs.filter(pk=c.id, attempt=c.attempt).update(
                **succeeded_fields(c.result, finished_by)
            )


def _move_steps(alias: str, owned: dict[int, int]) -> dict[int, int]:
    """The steps of the jobs just succeeded (job id to step id) leave ``released``; the steps
    moved, to their run. A step whose latest job is another (a replay's) does not move."""
    steps = WorkflowStep.objects.using(alias)
    rows = (
        steps.select_for_update()
        .filter(pk__in=sorted(set(owned.values())), state=StepState.RELEASED)
        .order_by("pk")
        .values_list("pk", "job_id", "run_id")
    )
    moved = {step_id: run_id for step_id, job_id, run_id in rows if owned.get(job_id) == step_id}
    if moved:
        steps.filter(pk__in=sorted(moved)).update(state=StepState.SUCCEEDED, finished_at=DbNow())
    return moved


def count_steps(alias: str, children: dict[int, int], runs: dict[int, int]) -> Counted:
    """The ORM's ``count_steps``, in the caller's transaction."""
    steps = WorkflowStep.objects.using(alias)
    for child_id in sorted(children):
        steps.filter(pk=child_id).update(
            pending_parents=Greatest(F("pending_parents") - children[child_id], Value(0))
        )
    ready: Any = steps.filter(pk__in=sorted(children), state=StepState.WAITING, pending_parents=0)
    left = list(ready.order_by("pk").values_list("pk", "run_id", "on_parent_failure"))
    if left:
        return Counted(left, [], counted=False)
    table = WorkflowRun.objects.using(alias)
    for run_id in sorted(runs):
        table.filter(pk=run_id).update(
            steps_finished=F("steps_finished") + runs[run_id],
            steps_succeeded=F("steps_succeeded") + runs[run_id],
        )
    done = table.filter(pk__in=sorted(runs), steps_finished__gte=F("steps_total"))
    return Counted([], list(done.order_by("pk").values_list("pk", flat=True)), counted=True)
