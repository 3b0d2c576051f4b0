"""Workflow runs in known states for the operator faces' tests (admin, API, commands).

``diamond()`` enqueues ``fetch -> (parse, thumbs) -> publish`` and runs it part way in this
process, as a worker would: fetch succeeded, parse claimed (running), thumbs dead (with its
dead letter), publish (``on_parent_failure="run"``) waiting for parse.
"""

from __future__ import annotations

from testapp import workflow_jobs as w

from django_leasejobs import Workflow, chain, protocol
from django_leasejobs.models import Job, Status, WorkflowRun, WorkflowStep
from django_leasejobs.runtime import execution

from .conftest import shifted

WORKER = "workflow-test-worker"


def claim_all() -> list[Job]:
    """Claim every due job (their run_at moved into the past first)."""
    Job.objects.filter(status=Status.PENDING).update(run_at=shifted(-1))
    return protocol.claim(WORKER, batch=100)


def run_steps(run: WorkflowRun, *names: str) -> None:
    """Claim the due jobs and run those of the steps ``names``; the others stay running."""
    for job in claim_all():
        step = WorkflowStep.objects.get(pk=job.workflow_step_id)
        if step.name in names:
            execution.run(job, WORKER)


def diamond(name: str = "order-42") -> WorkflowRun:
    wf = Workflow(name=name)
    fetch = wf.add(w.fetch.s("u"))
    parse = wf.add(w.parse.s(), after=[fetch])
    thumbs = wf.add(w.boom.si("thumbs"), after=[fetch], name="thumbs")
    wf.add(w.cleanup.si(), after=[parse, thumbs], name="publish", on_parent_failure="run")
    run = wf.enqueue()
    run_steps(run, "fetch")
    run_steps(run, "thumbs")  # parse is claimed and left running
    run.refresh_from_db()
    return run


def finished(name: str = "done") -> WorkflowRun:
    run = chain(w.tick.si("only")).enqueue()
    WorkflowRun.objects.filter(pk=run.pk).update(name=name)
    run_steps(run, "tick")
    run.refresh_from_db()
    assert run.status == "succeeded", run.status
    return run
