"""Workflows: chains, groups with callbacks, and graphs of jobs (docs/workflows.md).

``Workflow``, ``chain`` and ``group`` build them; ``cancel``, ``release`` and ``get`` act on a
run or a step as an operator does. State changes are the protocol's (``workflow_runs``,
``workflow_steps``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.signatures import Signature
from ..errors import WorkflowError
from .building import Group, Step, Workflow, chain, group

if TYPE_CHECKING:
    from ..models import WorkflowRun


def cancel(run_id: int | Any) -> bool:
    """Cancel a run: its steps that have not started are cancelled now, the running ones'
    jobs are asked to cancel (their workers end them). The run ends ``cancelled`` when its last
    step has ended. False when the run had already finished."""
    from ..protocol.workflow_runs import cancel_run

    return cancel_run(int(getattr(run_id, "pk", run_id)))


def release(step: int | Any) -> bool:
    """Let a held step go (an operator's decision after a parent failed under ``hold``): it
    is released now, or waits for its other parents. False when it was not held. Raises the
    enqueue's error (``UnknownJobError``, ``JobArgumentsError``) when its job cannot be made,
    and the step stays held."""
    from ..protocol.workflow_runs import unhold_step

    return unhold_step(int(getattr(step, "pk", getattr(step, "id", step))))


def get(run_id: int) -> WorkflowRun:
    """The run ``run_id``, read now (``WorkflowRun.DoesNotExist`` when there is none)."""
    from ..models import WorkflowRun
    from ..protocol import job_database

    return WorkflowRun.objects.using(job_database()).get(pk=run_id)


__all__ = [
    "Group",
    "Signature",
    "Step",
    "Workflow",
    "WorkflowError",
    "cancel",
    "chain",
    "get",
    "group",
    "release",
]
