"""A step's job lives in a module the process enqueueing it has not imported yet.

A worker runs a job whose module nothing imported at start (a job outside ``jobs.py``, in a
package ``LEASEJOBS_TASK_MODULES`` or an installed app allows): it imports the module for the
row. A step's enqueue must find its job the same way, or the step fails for good ("Could not
enqueue: No job is registered") and the run with it, although any worker could run that job:
an operator releasing a held step from ``manage.py shell`` (which imports only ``jobs.py``
modules), or a worker finishing a parent whose child's job is in a module it has not used yet.

``protocol.workflow_steps.enqueue_step`` looks the job up with ``registry.find``, as a worker does.
"""

from __future__ import annotations

import importlib

import pytest
from testapp import workflow_jobs as w

from django_leasejobs import Workflow, chain, workflows
from django_leasejobs.core import registry
from django_leasejobs.errors import UnknownJobError
from django_leasejobs.models import Job, WorkflowRun
from django_leasejobs.testing.running import drain
from django_leasejobs.workflows import Step

from ..conftest import forget_module
from .helpers import counters, job_of, states

pytestmark = pytest.mark.django_db(transaction=True)


def as_another_process(module_name: str) -> None:
    """Forget the module and its jobs, as a process that never imported it (a shell, a worker
    that has not met it yet) sees them."""
    # By the module of their function: a job may be registered under another name.
    for name, spec in list(registry._registry.items()):
        if spec.func.__module__ == module_name:
            del registry._registry[name]
    forget_module(module_name)


def held_report(settings, late_jobs: str, day: str) -> tuple[WorkflowRun, Step]:
    """A run whose ``late_report`` step (a job in ``late_jobs``, allowed) is held after its
    parent failed, seen by a process that has not imported ``late_jobs``."""
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]
    late = importlib.import_module(late_jobs)
    wf = Workflow(name=f"held-{day}")
    paid = wf.add(w.boom.s())
    held = wf.add(late.late_report.si(day), after=[paid], on_parent_failure="hold")
    run = wf.enqueue()
    drain()
    assert states(run) == {"boom": "failed", "late_report": "held"}
    as_another_process(late_jobs)
    return run, held


def test_releasing_a_held_step_finds_its_job_as_a_worker_would(settings, late_jobs: str) -> None:
    run, held = held_report(settings, late_jobs, "monday")
    assert workflows.release(held.id)
    assert states(run)["late_report"] == "released"
    drain()
    assert job_of(run, "late_report").result == "report for monday"
    assert counters(run) == ("failed", 2, 2, 1, 1, 0)


def test_releasing_a_held_step_whose_job_is_gone_raises_and_keeps_it_held(
    settings, late_jobs: str
) -> None:
    run, held = held_report(settings, late_jobs, "friday")
    # The release no longer has the job: its module is neither imported nor allowed.
    settings.LEASEJOBS_TASK_MODULES = []
    with pytest.raises(UnknownJobError, match="late_report"):
        workflows.release(held.id)
    assert states(run) == {"boom": "failed", "late_report": "held"}
    assert counters(run) == ("running", 2, 1, 0, 1, 0)
    assert not Job.objects.filter(workflow_step__run=run, name__endswith="late_report").exists()
    # The fix deployed, the operator releases it again.
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]
    assert workflows.release(held.id)
    drain()
    assert job_of(run, "late_report").result == "report for friday"
    assert counters(run) == ("failed", 2, 2, 1, 1, 0)


def test_a_parent_finishing_releases_a_child_whose_module_is_not_imported_yet(
    settings, late_jobs: str
) -> None:
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]
    late = importlib.import_module(late_jobs)
    run = chain(w.tick.si("first"), late.late_report.si("tuesday"), name="late-child").enqueue()
    as_another_process(late_jobs)
    drain()
    assert states(run) == {"tick": "succeeded", "late_report": "succeeded"}
    assert job_of(run, "late_report").result == "report for tuesday"
    assert counters(run) == ("succeeded", 2, 2, 2, 0, 0)
