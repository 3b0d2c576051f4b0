"""A workflow run as a whole: enqueue it, add steps to it while it runs, cancel it, let a
held step go (``workflows.release``), and re-arm a step whose dead job was replayed. Each one
transaction; the steps' own transitions are in ``workflow_steps``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from django.db import transaction
from django.db.models import F

from .. import dialects
from ..core import registry
from ..db.dbtime import DbNow
from ..db.deadlocks import retry_deadlocks
from ..errors import InvalidTransitionError, UnknownJobError, WorkflowError
from ..models import (
    RunStatus,
    StepState,
    WorkflowEdge,
    WorkflowRun,
    WorkflowStep,
)
from ..models.databases import using_database
from . import routes
from .base import job_database, logger
from .cancels import request_cancel
from .workflow_specs import StepSpec
from .workflow_steps import count_ended, enqueue_step, finish_if_done, parent_ended, propagate


def enqueue_run(name: str, specs: Sequence[StepSpec]) -> tuple[WorkflowRun, dict[str, int]]:
    """Insert the run, its steps and edges, and the jobs of the steps without parents, in one
    transaction (the caller's, when it has one). ``specs`` come in an order where parents come
    first (the builder's). Returns the run and its steps' ids by name."""
    using = _database_of(f"Workflow {name!r}", specs)
    with using_database(using), transaction.atomic(using=using):
        run = WorkflowRun.objects.using(using).create(name=name, steps_total=len(specs))
        ids = _insert_steps(using, run.pk, specs, {})
        for spec in specs:
            if not spec.after:
                _enqueue_root(using, ids[spec.name])
    logger.info("workflow.enqueued id=%s name=%s steps=%s", run.pk, name, len(specs))
    return run, ids


def _database_of(what: str, specs: Sequence[StepSpec]) -> str:
    """The one database the steps' jobs route to: a workflow lives in one (its steps unblock
    each other in one transaction); refused, naming them, when they route to several."""
    return routes.one_database(
        what, [(spec.job_name, spec.options.get("queue"), "") for spec in specs]
    )


def _enqueue_root(using: str, step_id: int) -> None:
    WorkflowStep.objects.using(using).filter(pk=step_id).update(
        state=StepState.RELEASED, released_at=DbNow()
    )
    enqueue_step(using, step_id, raise_errors=True)


def _insert_steps(
    using: str, run_id: int, specs: Sequence[StepSpec], known: dict[str, int]
) -> dict[str, int]:
    """Insert steps and their edges; ``known`` names the run's steps already there."""
    rows = [
        WorkflowStep(
            run_id=run_id,
            name=spec.name,
            job_name=spec.job_name,
            args=spec.args,
            kwargs=spec.kwargs,
            options=spec.options,
            takes_result=spec.takes_result,
            on_parent_failure=spec.on_parent_failure,
            pending_parents=len(spec.after),
        )
        for spec in specs
    ]
    dialects.for_alias(using).insert_rows(using, rows)
    ids = {**known, **{row.name: row.pk for row in rows}}
    edges = [
        WorkflowEdge(parent_id=ids[parent], child_id=ids[spec.name], position=position)
        for spec in specs
        for position, parent in enumerate(spec.after)
    ]
    WorkflowEdge.objects.using(using).bulk_create(edges, batch_size=1000)
    return ids


@retry_deadlocks
def add_steps(run_id: int, specs: Sequence[StepSpec]) -> dict[str, int]:
    """Add steps to a running run (``ctx.workflow.add``); their ``after`` may name the run's
    steps. A parent that has already ended counts as it ended: succeeded, it is not waited
    for; failed or cancelled, the new step's policy applies at once."""
    using = job_database()
    _look_up(specs)
    if _database_of("These steps", specs) != using:
        raise WorkflowError(
            f"These steps' queues are written in another database than workflow run {run_id}'s "
            f"({using!r}, LEASEJOBS_QUEUE_DATABASES): a workflow lives in one database."
        )
    with transaction.atomic(using=using):
        if not (
            WorkflowRun.objects.using(using)
            .filter(pk=run_id, status=RunStatus.RUNNING, cancel_requested_at=None)
            .update(steps_total=F("steps_total") + len(specs))
        ):
            raise InvalidTransitionError(f"Workflow run {run_id} is not running: no step added.")
        new = {spec.name for spec in specs}
        named = {parent for spec in specs for parent in spec.after if parent not in new}
        # Locked: a parent ending now either ends first (its state read here) or waits for
        # this commit and then finds the new edge.
        parents = {
            name: (pk, state)
            for pk, name, state in WorkflowStep.objects.using(using)
            .select_for_update()
            .filter(run_id=run_id, name__in=sorted(named))
            .order_by("pk")
            .values_list("pk", "name", "state")
        }
        missing = sorted(named - parents.keys())
        if missing:
            raise WorkflowError(f"No step named {', '.join(missing)} in run {run_id}.")
        specs = _named(using, run_id, specs)
        new = {spec.name for spec in specs}
        taken = set(
            WorkflowStep.objects.using(using)
            .filter(run_id=run_id, name__in=sorted(new))
            .values_list("name", flat=True)
        )
        if taken:
            raise WorkflowError(f"Run {run_id} already has steps named {sorted(taken)}.")
        ids = _insert_steps(using, run_id, specs, {n: pk for n, (pk, _) in parents.items()})
        ended = [
            (pk, state)
            for pk, state in parents.values()
            if state in (StepState.SUCCEEDED, StepState.FAILED, StepState.CANCELLED)
        ]
        for spec in specs:
            if not spec.after:
                _enqueue_root(using, ids[spec.name])
        _replay_ended(using, run_id, ended, {ids[spec.name] for spec in specs})
    return {spec.name: ids[spec.name] for spec in specs}


def _look_up(specs: Sequence[StepSpec]) -> None:
    """Find the new steps' jobs in the registry (importing their modules where allowed) before
    the run's row is locked; a name still unknown is refused by its enqueue, which says why."""
    for spec in specs:
        try:
            registry.find(spec.job_name)
        except UnknownJobError:
            continue


def _named(using: str, run_id: int, specs: Sequence[StepSpec]) -> list[StepSpec]:
    """Number the steps added under their function's name after the run's steps of that name
    (``-2``, ``-3``...); the names given are kept."""
    named: list[StepSpec] = []
    chosen: set[str] = set()
    for spec in specs:
        if not spec.named:
            spec = replace(spec, name=_free_step_name(using, run_id, spec.name, chosen))
        chosen.add(spec.name)
        named.append(spec)
    return named


def _free_step_name(using: str, run_id: int, base: str, chosen: set[str]) -> str:
    """``base``, else ``base-N`` just after the run's steps ``base-2`` ... ``base-(N-1)``.

    Found by probing the unique (run, name) index with a few names at a time: first the powers
    of two (``base``, ``base-2``, ``base-4``...), then up to ``PROBES`` numbers spread over the
    gap between the last one taken and the first one free, until the gap closes. Adding a
    run's n-th step of a name takes about log(n) / log(PROBES) queries of at most ``PROBES``
    index lookups each, where reading every step of that name made n additions quadratic.
    Default names fill 2, 3... in order, so N is the first free number; a gap left by a name
    given by hand may be passed over.
    """
    steps = WorkflowStep.objects.using(using).filter(run_id=run_id)

    def name_of(n: int) -> str:
        return base if n == 1 else f"{base}-{n}"

    def first_free(before: int, numbers: list[int]) -> tuple[int, int]:
        """The first free number of ``numbers`` (ascending, the last one free) and the one
        before it (``before`` for the first)."""
        names = [name_of(n) for n in numbers]
        taken = chosen | set(steps.filter(name__in=names).values_list("name", flat=True))
        for n in numbers:
            if name_of(n) not in taken:
                return before, n
            before = n
        raise WorkflowError(f"Run {run_id} has no free step name left for {base!r}.")

    # low is taken (0: no number is), high is free.
    low, high = first_free(0, [2**power for power in range(PROBES)])
    if low == 0:
        return base
    while high - low > 1:
        spread = range(low + 1, high, max(1, (high - low) // PROBES))
        low, high = first_free(low, [*spread, high])
    return name_of(high)


PROBES = 64
"""How many names one probe of the step names asks for."""


def _replay_ended(using: str, run_id: int, ended: list[tuple[int, str]], new: set[int]) -> None:
    """Apply parents that had already ended to the new steps only, as if each ended now (the
    run's counters counted those parents already)."""
    for parent_id, state in ended:
        children = (
            WorkflowEdge.objects.using(using)
            .filter(parent_id=parent_id, child_id__in=new)
            .order_by("child_id")
            .values_list("child_id", "child__on_parent_failure")
        )
        for child_id, policy in list(children):
            ended_as = parent_ended(using, child_id, policy, state)
            if ended_as is not None:
                propagate(using, run_id, [(child_id, ended_as)])


@retry_deadlocks
def cancel_run(run_id: int) -> bool:
    """Cancel the steps that have not started (waiting or held) and request the cancel of the
    released ones' jobs (a waiting job is cancelled at once, a running one by its worker).
    The run ends ``cancelled`` when its last step has ended. False: it had finished."""
    using = job_database()
    with transaction.atomic(using=using):
        # Steps before the run row, the order a step's completion takes them (its step, its
        # children, then the run): the other order deadlocked with members finishing.
        cancelled = (
            WorkflowStep.objects.using(using)
            .filter(run_id=run_id, state__in=[StepState.WAITING, StepState.HELD])
            .update(state=StepState.CANCELLED, reason="run cancelled", finished_at=DbNow())
        )
        runs = WorkflowRun.objects.using(using)
        if not runs.filter(pk=run_id, status=RunStatus.RUNNING).update(cancel_requested_at=DbNow()):
            transaction.set_rollback(True, using=using)  # finished: nothing of it may change
            return False
        count_ended(using, run_id, Counter({StepState.CANCELLED: cancelled}))
        finish_if_done(using, run_id)
    logger.info("workflow.cancel_requested id=%s not_started=%s", run_id, cancelled)
    released = (
        WorkflowStep.objects.using(using)
        .filter(run_id=run_id, state=StepState.RELEASED, job__isnull=False)
        .values_list("job_id", flat=True)
    )
    for job_id in list(released):
        request_cancel(job_id)
    return True


@retry_deadlocks
def unhold_step(step_id: int) -> bool:
    """An operator lets a held step go: released now when no parent is pending, else back to
    waiting for the rest. False when the step is not held.

    A job that cannot be made (its name no longer registered, its arguments no longer
    fitting) raises the enqueue's error and the step stays held: the operator deploys the
    fix and lets it go again, where an enqueue by a parent's end would fail the step."""
    using = job_database()
    steps = WorkflowStep.objects.using(using)
    with transaction.atomic(using=using):
        if steps.filter(pk=step_id, state=StepState.HELD, pending_parents=0).update(
            state=StepState.RELEASED, released_at=DbNow(), reason=""
        ):
            enqueue_step(using, step_id, raise_errors=True)
            logger.info("workflow.step_released step=%s", step_id)
            return True
        return bool(
            steps.filter(pk=step_id, state=StepState.HELD).update(
                state=StepState.WAITING, reason=""
            )
        )


def rearm(using: str, step_id: int | None, old_job_id: int, new_job_id: int) -> None:
    """A replay of the step's dead job ``old_job_id`` made ``new_job_id``, in the caller's
    transaction: the step is released again with the new job, and the dependants its failure
    cancelled or held (and theirs) wait for it again, unless another parent of theirs still
    failed. The run's counters take them back, and a finished run is running again."""
    if step_id is None:
        return
    steps = WorkflowStep.objects.using(using)
    if not steps.filter(pk=step_id, job_id=old_job_id, state=StepState.FAILED).update(
        state=StepState.RELEASED, job_id=new_job_id, reason="", finished_at=None
    ):
        return
    run_id, cancelled_run = (
        WorkflowRun.objects.using(using)
        .filter(steps__pk=step_id)
        .values_list("pk", "cancel_requested_at")
        .get()
    )
    counts: Counter[str] = Counter({StepState.FAILED: 1})
    todo = [step_id] if cancelled_run is None else []
    while todo:
        parent_id = todo.pop()
        children = (
            WorkflowEdge.objects.using(using)
            .select_for_update()
            .filter(parent_id=parent_id)
            .order_by("child_id")
            .values_list("child_id", flat=True)
        )
        for child_id in list(children):
            child = steps.filter(pk=child_id)
            child.update(pending_parents=F("pending_parents") + 1)
            if _has_failed_parent(using, child_id):
                continue
            if child.filter(state=StepState.CANCELLED, job__isnull=True).update(
                state=StepState.WAITING, reason="", finished_at=None
            ):
                counts[StepState.CANCELLED] += 1
                todo.append(child_id)
            else:
                child.filter(state=StepState.HELD).update(state=StepState.WAITING, reason="")
    count_ended(using, run_id, counts, sign=-1)
    logger.info("workflow.rearmed id=%s step=%s job=%s", run_id, step_id, new_job_id)


def _has_failed_parent(using: str, step_id: int) -> bool:
    return (
        WorkflowEdge.objects.using(using)
        .filter(child_id=step_id, parent__state__in=[StepState.FAILED, StepState.CANCELLED])
        .exists()
    )
