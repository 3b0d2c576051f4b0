"""Workflow runs in known states for the operator faces' tests (admin, API, commands).

``diamond()`` makes ``fetch -> (parse, thumbs) -> publish``: fetch succeeded, parse running,
thumbs dead (with its dead letter), publish waiting on both. The rows are written as the
engine writes them (a step's job points back at the step), without running a worker.
"""

from __future__ import annotations

from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import (
    DeadLetter,
    Job,
    RunStatus,
    StepState,
    WorkflowEdge,
    WorkflowRun,
    WorkflowStep,
)
from django_leasejobs.protocol import Failure

from .conftest import shifted


def _claim(job: Job) -> Job:
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (claimed,) = protocol.claim("workflow-test-worker", batch=1)
    assert claimed.pk == job.pk
    return claimed


def _step(run: WorkflowRun, name: str, state: str, job: Job | None, *after: WorkflowStep):
    step = WorkflowStep.objects.create(
        run=run,
        name=name,
        job_name=job.name if job is not None else "testapp.jobs.noop",
        state=state,
        pending_parents=0 if state != StepState.WAITING else len(after),
        job=job,
    )
    for position, parent in enumerate(after):
        WorkflowEdge.objects.create(parent=parent, child=step, position=position)
    if job is not None:
        Job.objects.filter(pk=job.pk).update(workflow_step=step)
    return step


def diamond(name: str = "order-42") -> WorkflowRun:
    run = WorkflowRun.objects.create(
        name=name, steps_total=4, steps_finished=2, steps_succeeded=1, steps_failed=1
    )
    done = jobs.noop.enqueue()
    Job.objects.filter(pk=done.pk).update(status="succeeded", finished_at=shifted(0))
    fetch = _step(run, "fetch", StepState.SUCCEEDED, done)
    running = jobs.noop.enqueue()
    _claim(running)
    parse = _step(run, "parse", StepState.RELEASED, running, fetch)
    dead = jobs.add.enqueue(1, 2, max_attempts=1)
    claimed = _claim(dead)
    protocol.fail(dead.pk, claimed.attempt, Failure("boom", "Traceback: boom"))
    assert DeadLetter.objects.filter(job_id=dead.pk).exists()
    thumbs = _step(run, "thumbs", StepState.FAILED, Job.objects.get(pk=dead.pk), fetch)
    _step(run, "publish", StepState.WAITING, None, parse, thumbs)
    return run


def finished(name: str = "done", status: str = RunStatus.SUCCEEDED) -> WorkflowRun:
    run = WorkflowRun.objects.create(
        name=name, status=status, steps_total=1, steps_finished=1, steps_succeeded=1
    )
    job = jobs.noop.enqueue()
    Job.objects.filter(pk=job.pk).update(status="succeeded", finished_at=shifted(0))
    _step(run, "only", StepState.SUCCEEDED, job)
    WorkflowRun.objects.filter(pk=run.pk).update(finished_at=shifted(0))
    run.refresh_from_db()
    return run
