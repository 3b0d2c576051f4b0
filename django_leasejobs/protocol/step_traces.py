"""A workflow step's process span, kept on its job's row for the steps after it to link to.

A step's job is inserted by its parents' ends, with no ``send`` span of its own, so its
``trace_context`` is free: while OpenTelemetry records, the runtime stores there, under
``process``, the W3C context of the step's last attempt's ``process`` span, with the attempt's
token (a stale worker's span changes nothing). A child step's attempt reads its parents' and
links its span to them (docs/observability.md). The key is not ``traceparent``, so nothing
reads it as the job's enqueue.
"""

from __future__ import annotations

from typing import Any

from ..models import Job, Status, WorkflowEdge
from .base import job_database

PROCESS = "process"
"""The key of ``Job.trace_context`` holding a step's last process span."""


def record_process_span(job_id: int, attempt: int, carrier: dict[str, str]) -> bool:
    """Keep the attempt's span context on its step's job; False when the token is stale."""
    return bool(
        Job.objects.using(job_database())
        .filter(pk=job_id, attempt=attempt, status=Status.RUNNING, workflow_step__isnull=False)
        .update(trace_context={PROCESS: carrier})
    )


def parent_process_spans(step_id: int) -> list[dict[str, Any]]:
    """The span contexts its parents' jobs kept, in ``after`` order (those that kept one)."""
    contexts = (
        WorkflowEdge.objects.using(job_database())
        .filter(child_id=step_id)
        .order_by("position")
        .values_list("parent__job__trace_context", flat=True)
    )
    return [
        context[PROCESS]
        for context in contexts
        if isinstance(context, dict) and isinstance(context.get(PROCESS), dict)
    ]
