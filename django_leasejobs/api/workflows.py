"""The workflow endpoints: list runs, get a run with a page of its steps, cancel a run.

A run's steps come a page at a time, in the order they were added (``limit`` and ``cursor`` as
the lists take them, ``next_cursor`` null on the last page): a run of thousands of steps is not
one answer of megabytes. A step's ``status`` is its job's only for a caller who may view jobs
(``view_job``); anyone else reads the step's own state. Reads go through
:mod:`django_leasejobs.reports.workflow_reads`, as the admin's run page and ``manage.py
workflows show`` do, so the three show the same step states; the cancel is
``django_leasejobs.workflows.cancel``, refused (409 ``invalid_state``) for a run that has
already finished, which it leaves unchanged.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse, QueryDict

from .. import workflows
from ..models import RunStatus, WorkflowRun
from ..models.databases import read_database
from ..reports import workflow_reads
from . import inputs, serialize
from .endpoint import audit
from .errors import ApiError
from .jobs import VIEW_JOB, get_row, page


def list_workflows(request: HttpRequest) -> JsonResponse:
    params = inputs.query(request, ("status", "name", "limit", "cursor"))
    rows = WorkflowRun.objects.using(read_database()).order_by("-id")  # a replica's, if set
    status = inputs.choice(params, "status", RunStatus.values)
    if status is not None:
        rows = rows.filter(status=status)
    name = inputs.name_filter(params, "name")
    if name is not None:
        rows = rows.filter(name=name)
    return page(params, rows, serialize.workflow_run)


def _detail(request: HttpRequest, run: WorkflowRun, params: QueryDict) -> JsonResponse:
    """The run with one page of its steps (ascending ids: the cursor is the last one's)."""
    size, after = inputs.limit(params), inputs.cursor(params)
    steps = workflow_reads.steps(run, limit=size + 1, after=after or 0)
    more = len(steps) > size
    steps = steps[:size]
    if not request.api_user.has_perm(VIEW_JOB):  # type: ignore[attr-defined]
        for step in steps:
            step.job_status = None  # its status is then the step's own state
    found = serialize.workflow_run(run, steps)
    found["next_cursor"] = inputs.encode_cursor(steps[-1].id) if more else None
    return JsonResponse(found)


def get_workflow(request: HttpRequest, run_id: int) -> JsonResponse:
    params = inputs.query(request, ("limit", "cursor"))
    return _detail(request, get_row(WorkflowRun, run_id, "workflow run"), params)


def cancel(request: HttpRequest, run_id: int) -> JsonResponse:
    """Cancel the run's steps that have not started and ask its running ones to end; the run
    afterwards, with the first page of its steps. A finished run is 409 ``invalid_state`` and
    stays as it was."""
    run = get_row(WorkflowRun, run_id, "workflow run")
    if not workflows.cancel(run.pk):  # its guarded update decides, not the row read above
        run.refresh_from_db(fields=["status"])
        raise ApiError(
            "invalid_state",
            f"Workflow run #{run.pk} is {run.status}: only running runs can be cancelled.",
        )
    run.refresh_from_db()
    audit(request, run, "Cancelled")
    return _detail(request, run, QueryDict())
