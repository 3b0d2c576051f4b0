"""The workflow admin: the runs (status, progress, age), and a run's page with its graph.

A run's page draws its steps as SVG on the server (:mod:`.workflow_graph`), each step coloured
by its state and linking to its job's page, lists them in a table, and has two buttons: cancel
the run (``workflows.cancel``: its steps that have not started are cancelled, its running
ones asked to end) and replay its dead steps (each through its dead letter, as the dead-letter
admin's replay: the engine re-arms the step's dependants). Both are POSTs with their own
permission (``cancel_workflowrun``; ``replay_deadletter`` with ``view_deadletter``), written
to the admin log; a refused one (a finished run, no dead step) changes nothing and says why.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from .. import protocol, workflows
from ..core.row_ids import row_id
from ..db.dbtime import DbNow
from ..errors import InvalidTransitionError, JobValidationError
from ..models import RunStatus, WorkflowRun
from ..reports import workflow_reads
from . import display, workflow_graph
from .base import ReadOnlyAdmin, has_operator_permission
from .databases import with_database

MAX_LISTED_STEPS = 500
"""Steps the run's table lists (the graph counts every step)."""


def refusal(run: WorkflowRun) -> str:
    return f"Workflow run #{run.pk} is {run.status}: only running runs can be cancelled."


def cancelled(run: WorkflowRun) -> str:
    """What a cancel did, read from the run afterwards."""
    if run.status == RunStatus.CANCELLED:
        return f"Cancelled workflow run #{run.pk}."
    return (
        f"Cancelled workflow run #{run.pk}: its steps not started are cancelled, its running "
        "steps' workers are asked to end them; the run ends cancelled when they have."
    )


@admin.register(WorkflowRun)
class WorkflowRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "status", "progress", "age", "finished_at")
    list_display_links = ("id", "name")
    list_filter = ("status",)
    search_fields = ("name",)
    search_help_text = "Finds a run by part of its name."
    list_per_page = 50
    show_full_result_count = False
    actions = ("cancel_runs",)
    fields = (
        "id",
        "name",
        "status",
        "progress",
        "created_at",
        "finished_at",
        "cancel_requested_at",
        "graph",
        "step_table",
    )
    readonly_fields = fields

    def has_cancel_run_permission(self, request: HttpRequest) -> bool:
        return has_operator_permission(request, "cancel_run")

    def has_replay_permission(self, request: HttpRequest) -> bool:
        """A replay reads the steps' dead letters: it needs viewing them too, as the
        dead-letter admin and the API ask."""
        return super().has_replay_permission(request) and request.user.has_perm(
            "django_leasejobs.view_deadletter"
        )

    # ------------------------------------------------------------------ columns

    @admin.display(description="progress")
    def progress(self, run: WorkflowRun) -> str:
        """Steps ended out of all; how many of them did not succeed, when any."""
        text = f"{run.steps_finished}/{run.steps_total} steps"
        bad = [
            f"{count} {what}"
            for count, what in ((run.steps_failed, "failed"), (run.steps_cancelled, "cancelled"))
            if count
        ]
        return f"{text} ({', '.join(bad)})" if bad else text

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkflowRun]:
        # The database's clock, as the workers see it, for the age.
        return super().get_queryset(request).annotate(db_now=DbNow())

    @admin.display(description="age", ordering="created_at")
    def age(self, run: WorkflowRun) -> str:
        now = getattr(run, "db_now", None) or timezone.now()
        return display.human_duration((now - run.created_at).total_seconds())

    @admin.display(description="graph")
    def graph(self, run: WorkflowRun) -> SafeString:
        rows = self._steps(run)
        nodes = [
            workflow_graph.Node(
                key=row.id,
                name=row.name,
                state=row.status,
                parents=row.parents,
                href=(
                    with_database(reverse("admin:django_leasejobs_job_change", args=[row.job_id]))
                    if row.job_id is not None
                    else None
                ),
            )
            for row in rows
        ]
        title = f"Workflow run #{run.pk} {run.name}: {len(nodes)} steps by depth"
        # workflow_graph.render escapes every text it writes.
        picture = mark_safe(workflow_graph.render(nodes, "leasejobs-workflow-graph", title))
        return format_html('<div class="leasejobs-graph-scroll">{}</div>', picture)

    @admin.display(description="steps")
    def step_table(self, run: WorkflowRun) -> SafeString:
        rows = self._steps(run)[:MAX_LISTED_STEPS]
        body = format_html_join(
            "",
            '<tr><td>{}</td><td>{}</td><td class="leasejobs-status-{}">{}</td><td>{}</td>'
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    row.name,
                    row.job_name,
                    row.status,
                    row.status,
                    self._job_link(row),
                    ", ".join(row.parent_names) or "\u2014",
                    row.on_parent_failure,
                    row.reason or "\u2014",
                )
                for row in rows
            ),
        )
        more = ""
        if run.steps_total > len(rows):
            more = f"The first {len(rows)} of {run.steps_total} steps."
        return format_html(
            '<table class="leasejobs-steps"><thead><tr><th>step</th><th>job name</th>'
            "<th>state</th><th>job</th><th>after</th><th>on parent failure</th>"
            "<th>reason</th></tr></thead><tbody>{}</tbody></table><p>{}</p>",
            body,
            more,
        )

    def _job_link(self, row: workflow_reads.StepRow) -> SafeString | str:
        if row.job_id is None:
            return "\u2014"
        url = with_database(reverse("admin:django_leasejobs_job_change", args=[row.job_id]))
        return format_html('<a href="{}">#{}</a>', url, row.job_id)

    def _steps(self, run: WorkflowRun) -> list[workflow_reads.StepRow]:
        """The run's steps, read once per page (the graph and the table share them): every
        step, as the graph counts the steps it does not draw (three queries whatever the size)."""
        cached = getattr(run, "_leasejobs_steps", None)
        if cached is None:
            cached = workflow_reads.steps(run)
            run._leasejobs_steps = cached  # type: ignore[attr-defined]
        return cached

    # ------------------------------------------------------------------ cancel and replay

    def _cancel(self, request: HttpRequest, run: WorkflowRun) -> bool:
        """Cancel through the library, whose guarded update decides: a run that finished
        since the page was shown is refused there, and nothing changes."""
        if not workflows.cancel(run.pk):
            run.refresh_from_db(fields=["status"])
            self.refused(request, refusal(run))
            return False
        run.refresh_from_db()
        self.done(request, run, cancelled(run))
        return True

    @admin.action(description="Cancel selected running workflow runs", permissions=["cancel_run"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        for run in queryset.order_by("pk"):
            self._cancel(request, run)

    def _replay_dead(self, request: HttpRequest, run: WorkflowRun) -> None:
        rows = workflow_reads.steps(run)
        letters = workflow_reads.dead_letters(rows, run._state.db)
        if not letters:
            self.refused(request, f"Workflow run #{run.pk} has no dead step to replay.")
            return
        names = {row.job_id: row.name for row in rows}
        for letter in letters:
            step = names.get(letter.job_id, "?")
            try:
                job = protocol.replay(letter.pk)
            except (JobValidationError, InvalidTransitionError) as exc:
                self.refused(
                    request, f"Step {step} (dead letter #{letter.pk}) was not replayed: {exc}"
                )
                continue
            self.done(
                request,
                run,
                f"Replayed step {step} of workflow run #{run.pk} (dead letter #{letter.pk}) as "
                f"job #{job.pk}.",
            )
            self.log_addition(request, job, f"Created by replay of dead letter #{letter.pk}.")

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(require_POST(self.cancel_view)),
                name="django_leasejobs_workflowrun_cancel",
            ),
            path(
                "<path:object_id>/replay-dead/",
                self.admin_site.admin_view(require_POST(self.replay_view)),
                name="django_leasejobs_workflowrun_replay",
            ),
            *super().get_urls(),
        ]

    def _run(self, object_id: str) -> WorkflowRun | None:
        pk = row_id(object_id)
        runs = WorkflowRun.objects.using(protocol.job_database())
        return get_object_or_404(runs, pk=pk) if pk is not None else None

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self.require(request, "cancel_run")
        run = self._run(object_id)
        if run is None:
            return HttpResponse("Not a workflow run id.", status=404)
        self._cancel(request, run)
        return self.back_to(run)

    def replay_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self.require(request, "replay")
        if not self.has_replay_permission(request):
            raise PermissionDenied("You do not have permission to view dead letters.")
        run = self._run(object_id)
        if run is None:
            return HttpResponse("Not a workflow run id.", status=404)
        self._replay_dead(request, run)
        return self.back_to(run)

    def detail_context(self, request: HttpRequest, run: WorkflowRun) -> dict[str, Any]:
        """The buttons: cancel for a running run, replay for a run with a dead step; each
        only for a user who holds its permission."""
        buttons = []
        if run.status == RunStatus.RUNNING and self.has_cancel_run_permission(request):
            url = with_database(reverse("admin:django_leasejobs_workflowrun_cancel", args=[run.pk]))
            buttons.append({"url": url, "label": "Cancel run", "slug": "cancel-run"})
        if run.steps_failed and self.has_replay_permission(request):
            url = with_database(reverse("admin:django_leasejobs_workflowrun_replay", args=[run.pk]))
            buttons.append({"url": url, "label": "Replay dead steps", "slug": "replay-dead"})
        return {"leasejobs_actions": buttons}
