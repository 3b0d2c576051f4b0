"""The workflow endpoints: list runs, get a run with its steps, cancel a run.

Reads go through :mod:`django_leasejobs.reports.workflow_reads`, as the admin's run page and
``manage.py workflows show`` do, so the three show the same step states; the cancel is
``django_leasejobs.workflows.cancel``, refused (409 ``invalid_state``) for a run that has
already finished, which it leaves unchanged.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from .. import protocol, workflows
from ..models import RunStatus, WorkflowRun
from ..reports import workflow_reads
from . import inputs, serialize
from .endpoint import audit
from .errors import ApiError
from .jobs import get_row, page


def list_workflows(request: HttpRequest) -> JsonResponse:
    params = inputs.query(request, ("status", "name", "limit", "cursor"))
    rows = WorkflowRun.objects.using(protocol.job_database()).order_by("-id")
    status = inputs.choice(params, "status", RunStatus.values)
    if status is not None:
        rows = rows.filter(status=status)
    name = inputs.name_filter(params, "name")
    if name is not None:
        rows = rows.filter(name=name)
    return page(params, rows, serialize.workflow_run)


def _detail(run: WorkflowRun) -> JsonResponse:
    return JsonResponse(serialize.workflow_run(run, workflow_reads.steps(run)))


def get_workflow(request: HttpRequest, run_id: int) -> JsonResponse:
    return _detail(get_row(WorkflowRun, run_id, "workflow run"))


def cancel(request: HttpRequest, run_id: int) -> JsonResponse:
    """Cancel the run's steps that have not started and ask its running ones to end; the run
    afterwards, with its steps. A finished run is 409 ``invalid_state`` and stays as it was."""
    run = get_row(WorkflowRun, run_id, "workflow run")
    if not workflows.cancel(run.pk):  # its guarded update decides, not the row read above
        run.refresh_from_db(fields=["status"])
        raise ApiError(
            "invalid_state",
            f"Workflow run #{run.pk} is {run.status}: only running runs can be cancelled.",
        )
    run.refresh_from_db()
    audit(request, run, "Cancelled")
    return _detail(run)
