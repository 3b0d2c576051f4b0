"""What a running step sees of its workflow: ``ctx.step``, ``ctx.parent_results`` and
``ctx.workflow.add(...)`` (docs/workflows.md). Read on first use, one or two queries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import protocol
from ..errors import WorkflowError
from ..models import WorkflowStep


class RunHandle:
    """The run a step belongs to: ``add`` appends steps to it while it runs."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"<workflow run {self.run_id}>"

    def add(
        self,
        signature: Any,
        after: Iterable[Any] = (),
        name: str | None = None,
        on_parent_failure: str = "cancel",
    ) -> WorkflowStep:
        """Add a step to the run, after steps of it (rows, or names): in its own transaction
        (the caller's, when the handler opened one). Its default name is the job's function
        name, numbered on repeats. ``WorkflowError`` when the run has finished or was
        cancelled, or ``after`` names no step of it."""
        from ..protocol.workflow_runs import add_steps
        from ..protocol.workflow_specs import check_policy, spec_of

        parents = [_parent_name(item) for item in after]
        policy = check_policy(on_parent_failure)
        named = name is not None
        step_name = name if name is not None else getattr(signature, "function_name", "")
        spec = spec_of(signature, step_name, parents, policy, named=named)
        ids = add_steps(self.run_id, [spec])
        return WorkflowStep.objects.using(protocol.job_database()).get(pk=ids.popitem()[1])


def _parent_name(item: Any) -> str:
    if isinstance(item, WorkflowStep):
        return item.name
    if isinstance(item, str):
        return item
    raise WorkflowError(f"after takes the run's steps or their names, not {item!r}.")


def step_of(step_id: int | None) -> WorkflowStep | None:
    if step_id is None:
        return None
    return WorkflowStep.objects.using(protocol.job_database()).filter(pk=step_id).first()


def parent_results(step_id: int | None) -> dict[str, Any]:
    """The step's parents' results by step name, in ``after`` order ({} for a job alone)."""
    if step_id is None:
        return {}
    from ..protocol.workflow_steps import parent_results as read

    return read(protocol.job_database(), step_id)
