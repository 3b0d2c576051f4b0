"""Pruning finished workflow runs by age: the run, its steps and its edges, in short batches.

A step holds its job's arguments (personal data, card numbers, whatever a handler takes), so a
run must not outlive its jobs: once the jobs are pruned (their results went with them), the
run goes too. A run is pruned only when it has finished, finished longer ago than the age of
its state (a succeeded run by the succeeded jobs' age, a failed one by the dead jobs', a
cancelled one by the cancelled jobs'), and no job of its steps is left. Until then it is
kept: a running run's rows are never touched, and a run with a dead job may be re-armed by the
dead letter's replay. Nothing writes to a finished run whose jobs are gone, so the batches
contend with no one.
"""

from __future__ import annotations

import datetime as dt

from django.db import connections, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from django.db.models.fields import DateTimeField

from ..db.dbtime import DbNow
from ..dialects import placeholders
from ..models import Job, RunStatus, Status, WorkflowEdge, WorkflowRun, WorkflowStep
from ..protocol.base import job_database, logger
from .pruning import next_keys

RUN_STATES: dict[str, str] = {
    Status.SUCCEEDED: RunStatus.SUCCEEDED,
    Status.DEAD: RunStatus.FAILED,
    Status.CANCELLED: RunStatus.CANCELLED,
}
"""The jobs' state whose age prunes the runs of each finished state."""

RUN = WorkflowRun._meta.db_table
STEP = WorkflowStep._meta.db_table
EDGE = WorkflowEdge._meta.db_table


def _prunable(alias: str, status: str, older_than: dt.timedelta) -> QuerySet[WorkflowRun]:
    if status not in RUN_STATES:
        raise ValueError(
            f"Runs are pruned by the age of a finished job state ({', '.join(RUN_STATES)}), "
            f"not {status!r}."
        )
    cutoff = ExpressionWrapper(DbNow() - Value(older_than), output_field=DateTimeField())
    # A step's latest job (its ``job``): an older one of the step (a dead one, replayed) keeps
    # the latest one while its dead letter exists, so the latest is the last to go.
    jobs_left = WorkflowStep.objects.using(alias).filter(
        Exists(Job.objects.using(alias).filter(pk=OuterRef("job_id"))), run_id=OuterRef("pk")
    )
    return WorkflowRun.objects.using(alias).filter(
        ~Exists(jobs_left), status=RUN_STATES[status], finished_at__lt=cutoff
    )


def count_prunable_runs(status: str, older_than: dt.timedelta) -> int:
    """How many runs ``prune_runs`` would delete now for ``status`` (a dry run)."""
    return _prunable(job_database(), status, older_than).count()


def _delete_runs(alias: str, ids: list[int], run_status: str) -> int:
    """Delete these runs (still in ``run_status``), their steps' edges and their steps."""
    id_list, params = placeholders("id", ids)
    params["status"] = run_status
    # Guarded by the run's state: a run that is running again (it cannot be, with no job
    # left to replay, but the statement says so itself) keeps every row. Edges first: on
    # MySQL the foreign keys are checked at once.
    runs = f"SELECT id FROM {RUN} WHERE id IN ({id_list}) AND status = %(status)s"
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {EDGE} WHERE child_id IN "
            f"(SELECT id FROM {STEP} WHERE run_id IN ({runs}))",
            params,
        )
        cursor.execute(f"DELETE FROM {STEP} WHERE run_id IN ({runs})", params)
        cursor.execute(f"DELETE FROM {RUN} WHERE id IN ({id_list}) AND status = %(status)s", params)
        return cursor.rowcount


def prune_runs(
    status: str, older_than: dt.timedelta, *, batch: int = 1000, after_id: int = 0
) -> tuple[int, int]:
    """Delete one batch of finished runs (with their steps and edges) whose jobs are gone;
    return (runs deleted, last id looked at).

    ``status`` is the jobs' state whose age applies (``RUN_STATES``). Call again with
    ``after_id`` set to the returned id until it comes back unchanged. Each batch is one short
    transaction over runs taken in primary-key order, at most ``batch`` runs and, past the
    first run, at most ``batch`` steps in all (one run larger than that goes alone), with
    SKIP LOCKED where the database has it.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, not {batch!r}.")
    alias = job_database()
    with transaction.atomic(using=alias):
        chosen = next_keys(_prunable(alias, status, older_than), alias, after_id)
        ids: list[int] = []
        steps = 0
        for pk, total in chosen.values_list("pk", "steps_total")[:batch]:
            if ids and steps + total > batch:
                break
            ids.append(pk)
            steps += total
        if not ids:
            return 0, after_id
        deleted = _delete_runs(alias, ids, RUN_STATES[status])
    logger.info(
        "workflow.pruned status=%s count=%s first_id=%s last_id=%s",
        RUN_STATES[status],
        deleted,
        ids[0],
        ids[-1],
    )
    return deleted, ids[-1]
