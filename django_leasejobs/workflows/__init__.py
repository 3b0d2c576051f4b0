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
    step has ended. False when the run had already finished. A run given as a row is cancelled
    in the queue database it was read from (shards repeat ids)."""
    from ..models.databases import using_database
    from ..protocol.workflow_runs import cancel_run

    with using_database(_database_of(run_id)):
        return cancel_run(int(getattr(run_id, "pk", run_id)))


def release(step: int | Any) -> bool:
    """Let a held step go (an operator's decision after a parent failed under ``hold``): it
    is released now, or waits for its other parents. False when it was not held. Raises the
    enqueue's error (``UnknownJobError``, ``JobArgumentsError``) when its job cannot be made,
    and the step stays held. A step given as a row is released in its own queue database."""
    from ..models.databases import using_database
    from ..protocol.workflow_runs import unhold_step

    with using_database(_database_of(step)):
        return unhold_step(int(getattr(step, "pk", getattr(step, "id", step))))


def _database_of(row: Any) -> str | None:
    """The queue database a row was read from (the primary of a replica), else ``None``: the
    database worked on (an id alone names no database)."""
    from ..models.databases import primary_of

    alias = getattr(getattr(row, "_state", None), "db", None)
    return primary_of(alias) if alias else None


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
