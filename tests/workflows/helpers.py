"""What the workflow tests share: reading hits, steps and runs back."""

from __future__ import annotations

import json
from typing import Any

from testapp.models import Hit

from django_leasejobs.models import Job, WorkflowRun, WorkflowStep


def hits(prefix: str = "") -> list[str]:
    return list(
        Hit.objects.filter(label__startswith=prefix).order_by("pk").values_list("label", flat=True)
    )


def received(label: str) -> list[Any]:
    """What the step labelled ``label`` was called with (its only hit)."""
    (hit,) = [h for h in hits(label + ":") if h.split(":", 1)[0] == label]
    return list(json.loads(hit.split(":", 1)[1]))


def states(run: WorkflowRun) -> dict[str, str]:
    return dict(WorkflowStep.objects.filter(run=run).values_list("name", "state"))


def step(run: WorkflowRun, name: str) -> WorkflowStep:
    return WorkflowStep.objects.get(run=run, name=name)


def job_of(run: WorkflowRun, name: str) -> Job:
    return Job.objects.get(pk=step(run, name).job_id)


def fresh(run: WorkflowRun) -> WorkflowRun:
    return WorkflowRun.objects.get(pk=run.pk)


def counters(run: WorkflowRun) -> tuple[str, int, int, int, int, int]:
    r = fresh(run)
    return (
        r.status,
        r.steps_total,
        r.steps_finished,
        r.steps_succeeded,
        r.steps_failed,
        r.steps_cancelled,
    )
