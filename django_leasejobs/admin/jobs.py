"""The job admin: find a job, read what happened to it, and cancel, run or retry it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from .. import protocol
from ..core.row_ids import row_id
from ..db.dbtime import DbNow
from ..models import CLAIMABLE, Job, Status
from . import dashboard, display, job_search, leases, pauses
from .base import MAX_WORDS, PayloadDisplay, ReadOnlyAdmin, fieldset_fields
from .bulk_actions import BulkJobViews
from .databases import with_database
from .filters import JobNameFilter, QueueFilter, ScheduleFilter
from .job_actions import JOB_ACTIONS
from .paginator import CountingPaginator


@admin.register(Job)
class JobAdmin(BulkJobViews, PayloadDisplay, ReadOnlyAdmin):
    list_display = (
        "id",
        "name",
        "status_marked",
        "queue",
        "priority",
        "run_at_marked",
        "attempts",
        "progress_column",
        "lease_owner",
        "lease_expires_at",
        "arguments",
    )
    list_display_links = ("id", "name")
    list_filter = ("status", QueueFilter, JobNameFilter, ("schedule", ScheduleFilter))
    # What the search box says it finds; job_search.search reads each through an index.
    search_fields = ("=id", "name", "=dedupe_key", "=concurrency_key")
    search_help_text = (
        "Finds a job by its id, dedupe key or concurrency key, or by part of its name. Every "
        f"word must match; the first {MAX_WORDS} words are used."
    )
    list_per_page = 50
    # Neither the full count nor the filtered one reads millions of rows: exact up to 10,000,
    # then the planner's estimate (PostgreSQL) or "10,000+" (admin/paginator.py).
    show_full_result_count = False
    paginator = CountingPaginator
    actions = ("cancel_jobs", "run_jobs_now", "retry_jobs_now")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "name",
                    "status",
                    "progress_bar",
                    "cancel_request",
                    "queue",
                    "priority",
                    "run_at_marked",
                    "dedupe_key",
                    "schedule_link",
                    "occurrence_at",
                )
            },
        ),
        (
            "Attempts and lease",
            {
                "fields": (
                    "attempts",
                    "released",
                    "snoozes",
                    "deferrals",
                    "first_deferred_at",
                    "lease_owner",
                    "lease_expires_at",
                    "created_at",
                    "started_at",
                    "finished_at",
                    "retried_at",
                    "run_duration",
                )
            },
        ),
        (
            "Limits and fairness",
            {
                "fields": (
                    "concurrency_key",
                    "concurrency_limit",
                    "rate_key",
                    "rate",
                    "fair_key",
                    "fair_weight",
                    "fair_at",
                ),
                "description": "Keys computed at enqueue from @job(concurrency_key=..., "
                "rate_limit=..., fair_key=...): the claim starts the job only within its "
                "limits; its fair key gave it its place in line (fair_at, its run_at then) "
                "among other keys' jobs.",
            },
        ),
        ("Arguments", {"fields": ("arguments_version", "args_json", "kwargs_json")}),
        ("Outcome", {"fields": ("result_json", "last_error_text", "dead_letter_link")}),
        ("Attempt history", {"fields": ("history",)}),
        ("Logs", {"fields": ("logs_by_attempt",)}),
    )
    readonly_fields = fieldset_fields(fieldsets)

    @admin.display(description="version")
    def arguments_version(self, obj: Job) -> str:
        """The ``@job(version=)`` the arguments were written for, beside the handler's."""
        return display.version_text(obj.name, obj.version, obj.task_backend)

    @admin.display(description="rate limit")
    def rate(self, obj: Job) -> str:
        if obj.rate_limit is None:
            return "-"
        return f"{obj.rate_limit} starts per {obj.rate_period} s"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        return job_search.search(request, queryset, search_term), False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        # The database's clock, as the workers see it, for the due/overdue marker.
        return super().get_queryset(request).annotate(db_now=DbNow())

    # ------------------------------------------------------------------ columns

    @admin.display(description="status", ordering="status")
    def status_marked(self, job: Job) -> SafeString | str:
        """The status, and for a running job an operator asked to cancel, that it was asked."""
        if job.status == Status.RUNNING and job.cancel_requested_at is not None:
            return format_html(
                '{} <span class="leasejobs-cancel-requested" title="its worker will end it">'
                "(cancel requested)</span>",
                job.get_status_display(),
            )
        return job.get_status_display()

    @admin.display(description="cancel request")
    def cancel_request(self, job: Job) -> str:
        if job.cancel_requested_at is None:
            return "\u2014"
        when = job.cancel_requested_at.strftime("%Y-%m-%d %H:%M:%S %Z")
        if job.status == Status.RUNNING:
            return f"cancel requested at {when}; its worker will end the attempt"
        return f"cancel requested at {when}"

    @admin.display(description="run at", ordering="run_at")
    def run_at_marked(self, job: Job) -> SafeString | str:
        when = job.run_at.strftime("%Y-%m-%d %H:%M:%S %Z")
        now = getattr(job, "db_now", None)
        if job.status in CLAIMABLE and now is not None and job.run_at <= now:
            late = display.human_duration((now - job.run_at).total_seconds())
            return format_html(
                '{} <span class="leasejobs-overdue" title="due and not yet claimed">'
                "overdue {}</span>",
                when,
                late,
            )
        return when

    @admin.display(description="attempt")
    def attempts(self, job: Job) -> str:
        return f"{job.attempts_charged}/{job.max_attempts}"

    @admin.display(description="logs")
    def logs_by_attempt(self, job: Job) -> SafeString:
        return display.job_logs(job.logs(), job.errors)

    @admin.display(description="progress")
    def progress_column(self, job: Job) -> str:
        return display.progress_percent(job.progress)

    @admin.display(description="progress")
    def progress_bar(self, job: Job) -> SafeString | str:
        return display.progress_bar(job.progress)

    @admin.display(description="arguments")
    def arguments(self, job: Job) -> str:
        return display.call_preview(job.args, job.kwargs)

    @admin.display(description="schedule")
    def schedule_link(self, job: Job) -> SafeString | str:
        return display.admin_link(job.schedule)

    @admin.display(description="duration of the last run")
    def run_duration(self, job: Job) -> str:
        return display.human_duration(display.duration(job.started_at, job.finished_at))

    @admin.display(description="result")
    def result_json(self, job: Job) -> SafeString:
        return display.pretty_json(job.result)

    @admin.display(description="last error")
    def last_error_text(self, job: Job) -> SafeString:
        return display.preformatted(job.last_error)

    @admin.display(description="dead letter / replay")
    def dead_letter_link(self, job: Job) -> SafeString | str:
        letter = getattr(job, "dead_letter", None)
        origin = getattr(job, "replay_of", None)
        if letter is not None:
            return display.admin_link(letter, f"dead letter #{letter.pk}")
        if origin is not None:
            return display.admin_link(origin, f"replay of dead letter #{origin.pk}")
        return "\u2014"

    # ------------------------------------------------------------------ bulk actions

    def _bulk(self, request: HttpRequest, queryset: QuerySet[Job], slug: str) -> None:
        action = JOB_ACTIONS[slug]
        changed: dict[str, list[int]] = {}
        refused = []
        for job in queryset.order_by("pk"):
            done = action.apply(job.pk)
            if done is not None:
                self.log_change(request, job, done)
                changed.setdefault(done, []).append(job.pk)
            else:
                refused.append(job)
        for done, ids in changed.items():
            self.message_user(request, f"{done}: {len(ids)} job(s).")
        for job in refused[:20]:
            job.refresh_from_db(fields=["status"])
            self.refused(request, action.refusal(job))
        if len(refused) > 20:
            self.refused(request, f"... and {len(refused) - 20} more refused.")

    @admin.action(
        description="Cancel selected jobs (pending or failed; running: ask their worker)",
        permissions=["cancel"],
    )
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._bulk(request, queryset, "cancel")

    @admin.action(description="Run selected pending jobs now", permissions=["run_now"])
    def run_jobs_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._bulk(request, queryset, "run-now")

    @admin.action(description="Retry selected failed jobs now", permissions=["run_now"])
    def retry_jobs_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._bulk(request, queryset, "retry")

    # ------------------------------------------------------------------ detail page buttons

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(require_POST(self.job_action_view))
        return [
            *self.bulk_urls(),  # first: "bulk/cancel/" would match "<object_id>/cancel/"
            *(
                path(
                    f"<path:object_id>/{slug}/",
                    view,
                    {"slug": slug},
                    name=f"django_leasejobs_job_{slug.replace('-', '_')}",
                )
                for slug in JOB_ACTIONS
            ),
            path(
                "dashboard/",
                self.admin_site.admin_view(self.dashboard_view),
                name="django_leasejobs_dashboard",
            ),
            path(
                "leases/",
                self.admin_site.admin_view(self.leases_view),
                name="django_leasejobs_leases",
            ),
            path(
                "dashboard/<str:action>/",
                self.admin_site.admin_view(require_POST(self.pause_view)),
                name="django_leasejobs_pause",
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The list, with links to act on all it lists (``bulk_actions``)."""
        context = {**(extra_context or {}), "leasejobs_bulk_links": self.bulk_links(request)}
        return super().changelist_view(request, context)

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        return dashboard.dashboard_view(self, request)

    def leases_view(self, request: HttpRequest) -> HttpResponse:
        return leases.leases_view(self, request)

    def pause_view(self, request: HttpRequest, action: str) -> HttpResponse:
        return pauses.pause_view(self, request, action)

    def job_action_view(self, request: HttpRequest, object_id: str, slug: str) -> HttpResponse:
        """POST target of the buttons on a job's page; refuses without permission or state."""
        action = JOB_ACTIONS[slug]
        self.require(request, action.permission)
        pk = row_id(object_id)
        found = Job.objects.using(protocol.job_database())
        job = get_object_or_404(found, pk=pk) if pk is not None else None
        if job is None:
            return HttpResponse("Not a job id.", status=404)
        done = action.apply(job.pk)
        if done is not None:
            self.done(request, job, f"Job #{job.pk}: {done.lower()}.")
        else:
            job.refresh_from_db(fields=["status"])
            self.refused(request, action.refusal(job))
        return self.back_to(job)

    def available_actions(self, request: HttpRequest, job: Job) -> list[dict[str, str]]:
        """The buttons to show: only with the permission, and only from an allowed state."""
        buttons = []
        for action in JOB_ACTIONS.values():
            allowed = getattr(self, f"has_{action.permission}_permission")(request)
            if allowed and job.status in action.shown_for:
                url = with_database(
                    reverse(
                        f"admin:django_leasejobs_job_{action.slug.replace('-', '_')}",
                        args=[job.pk],
                    )
                )
                buttons.append({"url": url, "label": action.label, "slug": action.slug})
        return buttons

    def detail_context(self, request: HttpRequest, job: Job) -> dict[str, Any]:
        """The operator buttons the job's state and the user's permissions allow."""
        return {"leasejobs_actions": self.available_actions(request, job)}
