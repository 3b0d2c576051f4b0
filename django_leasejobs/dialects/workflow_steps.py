"""The operation ``complete_steps`` with the ORM: a worker's batch of workflow successes.

A group's members finish by the thousand into one callback step and one run row; written one
success per transaction, each held those rows' locks until its commit and the members drained
at a small fraction of plain jobs' rate. One call moves a batch: the jobs (locked in id order,
each write fenced by its token), their steps (guarded by ``released`` and their latest job),
one decrement per distinct child by the number of its parents in the batch, one counter
UPDATE per run. Locks are taken in the order the protocol's one-at-a-time ``job_ended``
takes them (jobs, steps, children by id, runs by id), so the two queue instead of
deadlocking. What follows from a child left with no pending parent (its release, or its skip)
is the protocol's: the dialect reports those children and the runs whose every step ended.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db.models import F, Value
from django.db.models.functions import Greatest

from ..db.dbtime import DbNow
from ..models import Job, Status, StepState, WorkflowEdge, WorkflowRun, WorkflowStep
from .tokens import Completion, Token, succeeded_fields, tokens_q


class StepsCompleted(NamedTuple):
    """What ``complete_steps`` did: the workflow jobs it completed, the children left with no
    pending parent and still waiting (id, run id, policy), and the runs whose every step has
    ended (their counters count them; their status is the protocol's to set)."""

    jobs: set[int]
    ready: list[tuple[int, int, str]]
    finished_runs: list[int]


NOTHING = StepsCompleted(set(), [], [])


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
        return NOTHING
    _write_successes(alias, [wanted[pk] for pk in owned], finished_by)
    by_run = _move_steps(alias, owned)
    ready = _decrement_children(alias, [s for ids in by_run.values() for s in ids])
    finished = _count_on_runs(alias, by_run)
    return StepsCompleted(set(owned), ready, finished)


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


def _move_steps(alias: str, owned: dict[int, int]) -> dict[int, list[int]]:
    """The steps of the jobs just succeeded (job id to step id) leave ``released``; the steps
    moved, by run. A step whose latest job is another (a replay's) does not move."""
    steps = WorkflowStep.objects.using(alias)
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
    if moved:
        steps.filter(pk__in=moved).update(state=StepState.SUCCEEDED, finished_at=DbNow())
    return by_run


def _decrement_children(alias: str, parents: list[int]) -> list[tuple[int, int, str]]:
    """Each child of these parents loses that many pending parents, one UPDATE per child in
    id order; the children now waiting on none (id, run id, policy)."""
    if not parents:
        return []
    ended = Counter(
        WorkflowEdge.objects.using(alias)
        .filter(parent_id__in=parents)
        .exclude(child_id__in=parents)  # a released on_failure step ending in the same batch
        .values_list("child_id", flat=True)
    )
    steps = WorkflowStep.objects.using(alias)
    for child_id in sorted(ended):
        steps.filter(pk=child_id).update(
            pending_parents=Greatest(F("pending_parents") - ended[child_id], Value(0))
        )
    ready: Any = steps.filter(pk__in=sorted(ended), state=StepState.WAITING, pending_parents=0)
    return list(ready.order_by("pk").values_list("pk", "run_id", "on_parent_failure"))


def _count_on_runs(alias: str, by_run: dict[int, list[int]]) -> list[int]:
    """Count the steps succeeded on their runs, one UPDATE per run in id order; the runs
    whose every step has now ended."""
    runs = WorkflowRun.objects.using(alias)
    for run_id in sorted(by_run):
        succeeded = len(by_run[run_id])
        runs.filter(pk=run_id).update(
            steps_finished=F("steps_finished") + succeeded,
            steps_succeeded=F("steps_succeeded") + succeeded,
        )
    done = runs.filter(pk__in=sorted(by_run), steps_finished__gte=F("steps_total"))
    return list(done.order_by("pk").values_list("pk", flat=True))
