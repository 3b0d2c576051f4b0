"""What the operator faces read of workflows: a run's steps with their jobs, and runs by status.

The admin's run page, the API's ``workflows/<id>/`` and ``manage.py workflows show`` all read a
run through :func:`steps`, so they show the same states (the API and the command print the
same JSON: :func:`run_as_dict`); ``jobstats``, the API and the admin's
list read the counts through :func:`counts`. Nothing here writes: cancelling goes through
``django_leasejobs.workflows.cancel``, replaying a dead step through ``protocol.replay``.

Cost: a run's page reads its steps (one query), its edges with their parents' names (one query)
and the status of its released steps' jobs (one query, by primary key), so a group of 10,000
members is three queries, not one per step; the API reads a page of steps at a time. The counts
go through the index on the run's status, each stopped at ``dialects.COUNT_CAP`` rows as the queue
counts are.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from .. import dialects
from ..core.durations import iso
from ..models import (
    DeadLetter,
    Job,
    RunStatus,
    WorkflowEdge,
    WorkflowRun,
    WorkflowStep,
)


@dataclass
class StepRow:
    """One step as the faces show it. ``status`` is its job's status when it has a job
    (``pending``, ``running``, ``failed`` waiting for a retry, ``dead``, ...), else the step's
    state (``waiting``, ``held``, or ``cancelled`` before it started; a pruned job's step too)."""

    id: int
    name: str
    job_name: str
    state: str
    on_parent_failure: str
    reason: str
    job_id: int | None
    job_status: str | None
    released_at: dt.datetime | None
    finished_at: dt.datetime | None
    parents: list[int] = field(default_factory=list)
    """Parent step ids, in ``after=[...]`` order."""
    parent_names: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.job_status or self.state

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "job_name": self.job_name,
            "state": self.state,
            "status": self.status,
            "on_parent_failure": self.on_parent_failure,
            "reason": self.reason or None,
            "job_id": self.job_id,
            "parents": list(self.parent_names),
        }


def run_as_dict(run: WorkflowRun, steps: list[StepRow] | None = None) -> dict[str, Any]:
    """A run and its counters as JSON (times in ISO 8601, UTC); with ``steps``, its steps
    too: the API's ``WorkflowRun`` and ``WorkflowRunDetail``, ``workflows list|show --json``."""
    found: dict[str, Any] = {
        "id": run.pk,
        "name": run.name,
        "status": run.status,
        "created_at": iso(run.created_at),
        "finished_at": iso(run.finished_at),
        "cancel_requested_at": iso(run.cancel_requested_at),
        "steps_total": run.steps_total,
        "steps_finished": run.steps_finished,
        "steps_succeeded": run.steps_succeeded,
        "steps_failed": run.steps_failed,
        "steps_cancelled": run.steps_cancelled,
    }
    if steps is not None:
        found["steps"] = [step.as_dict() for step in steps]
    return found


STEP_COLUMNS = (
    "id",
    "name",
    "job_name",
    "state",
    "on_parent_failure",
    "reason",
    "job_id",
    "released_at",
    "finished_at",
)


def steps(run: WorkflowRun, limit: int | None = None, after: int = 0) -> list[StepRow]:
    """The run's steps in the order they were added (at most ``limit``, past the step id
    ``after``: a page), with their parents and their jobs' statuses."""
    alias = run._state.db or None
    rows = WorkflowStep.objects.using(alias).filter(run_id=run.pk, id__gt=after).order_by("id")
    if limit is not None:
        rows = rows[:limit]
    found = [StepRow(job_status=None, **values) for values in rows.values(*STEP_COLUMNS)]
    by_id = {row.id: row for row in found}
    edges = WorkflowEdge.objects.using(alias)
    # A page reads its own steps' edges only; the parents' names come with them (a parent
    # may be on an earlier page).
    edges = (
        edges.filter(child__run_id=run.pk)
        if limit is None and not after
        else edges.filter(child_id__in=list(by_id))
    )
    for parent, child, parent_name in edges.order_by("child_id", "position", "id").values_list(
        "parent_id", "child_id", "parent__name"
    ):
        if child in by_id:
            by_id[child].parents.append(parent)
            by_id[child].parent_names.append(parent_name)
    job_ids = [row.job_id for row in found if row.job_id is not None]
    statuses = dict(
        Job.objects.using(alias).filter(pk__in=job_ids).values_list("pk", "status")
        if job_ids
        else []
    )
    for row in found:
        row.job_status = statuses.get(row.job_id) if row.job_id is not None else None
    return found


def dead_letters(rows: list[StepRow], alias: str | None = None) -> list[DeadLetter]:
    """The dead letters of the steps whose job ended dead, not replayed yet: what a replay of
    the run's dead steps replays, oldest first."""
    dead = [row.job_id for row in rows if row.job_id is not None and row.job_status == "dead"]
    if not dead:
        return []
    return list(
        DeadLetter.objects.using(alias)
        .filter(job_id__in=dead, replayed_job__isnull=True)
        .order_by("pk")
    )


def counts(using: str | None = None) -> dict[str, dialects.Count]:
    """Runs by status, each through the status index and stopped at ``dialects.COUNT_CAP``."""
    rows = WorkflowRun.objects.using(using)
    return {status: dialects.count(rows.filter(status=status)) for status in RunStatus.values}


def counts_as_dict(using: str | None = None) -> dict[str, int]:
    """:func:`counts` as JSON-ready numbers (``jobstats --json``, the API's ``queues/`` and
    ``health/``): exact up to ``dialects.COUNT_CAP``, past it the estimate or the cap."""
    return {status: count.value for status, count in counts(using).items()}


def counts_line(using: str | None = None) -> str | None:
    """``jobstats``' line, or None when the database holds no run (a project without
    workflows sees its table unchanged)."""
    found = counts(using)
    if not any(count.value for count in found.values()):
        return None
    return "workflow runs: " + ", ".join(f"{status} {c.text()}" for status, c in found.items())
