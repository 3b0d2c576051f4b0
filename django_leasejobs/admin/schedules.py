"""The schedule admin: edit, enable/disable, the next occurrences and the occurrence view."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import NestedObjects
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import capfirst

from ..core.row_ids import row_id
from ..models import Schedule
from ..models.databases import job_database
from ..reports.occurrences import next_occurrences
from . import json_input, occurrences
from .base import NulRefusingLists
from .databases import DatabasePages, chosen, with_database
from .replica_lists import ReplicaLists


def unique_in_database(form_class: Any) -> Any:
    """``form_class``, checking that no other schedule of the chosen queue database holds the
    name: Django's own check reads the routers' database, which with shards may be another
    (a name free there but taken here would end in an IntegrityError, a server error)."""

    class UniqueInDatabase(form_class):
        def validate_unique(self) -> None:
            if chosen() is None:
                super().validate_unique()
                return
            exclude = self._get_validation_exclusions()
            exclude.add("name")
            try:
                self.instance.validate_unique(exclude=exclude)
            except ValidationError as exc:
                self._update_errors(exc)
            name = self.cleaned_data.get("name")
            others = Schedule.objects.using(job_database()).exclude(pk=self.instance.pk)
            if name and others.filter(name=name).exists():
                self.add_error("name", f"A schedule named {name!r} exists in this database.")

    return UniqueInDatabase


@admin.register(Schedule)
class ScheduleAdmin(DatabasePages, ReplicaLists, NulRefusingLists, admin.ModelAdmin):
    """Editable: ``Schedule.clean()`` refuses what the scheduler could not run (bad cron,
    timezone, job name, arguments), the same checks as the settings sync. An edit of a schedule
    from settings stays until its entry in settings changes (see ``syncschedules``)."""

    list_display = (
        "name",
        "cron",
        "timezone",
        "job",
        "enabled",
        "next_occurrence",
        "last_occurrence_at",
        "occurrences_link",
    )
    formfield_overrides = {models.JSONField: {"form_class": json_input.JSONInputField}}
    list_filter = ("enabled", "from_settings", "from_code")
    search_fields = ("name", "job")
    actions = ("enable_schedules", "disable_schedules")
    readonly_fields = (
        # The cursor is the scheduler's: moving it back by hand would fire old occurrences again.
        "upcoming",
        "occurrences_link",
        "last_occurrence_at",
        "from_settings",
        "from_code",
        "created_at",
        "updated_at",
    )

    # ------------------------------------------------------------------ the chosen database

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        """Django's form, whose unique name is checked in the chosen queue database."""
        return unique_in_database(super().get_form(request, obj, change, **kwargs))

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        """Written to the queue database the page shows (``?database=``); Django's routers
        would send a new schedule to the home one."""
        if chosen() is None:
            super().save_model(request, obj, form, change)
        else:
            obj.save(using=job_database())

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """Django's list of what a delete takes with it, collected in the chosen queue
        database (Django's reads the routers' one, which with shards may hold other rows of
        the same ids)."""
        if chosen() is None:
            return super().get_deleted_objects(objs, request)
        collector = NestedObjects(using=job_database(), origin=objs)
        collector.collect(objs)
        perms_needed: set[str] = set()

        def describe(obj: models.Model) -> str:
            opts = obj._meta
            model_admin = self.admin_site._registry.get(type(obj))
            if model_admin is not None and not model_admin.has_delete_permission(request, obj):
                perms_needed.add(str(opts.verbose_name))
            return f"{capfirst(opts.verbose_name)}: {obj}"

        to_delete = collector.nested(describe)
        protected = [describe(obj) for obj in collector.protected]
        found: dict[Any, Any] = collector.model_objs  # model -> its rows
        counts = {model._meta.verbose_name_plural: len(rows) for model, rows in found.items()}
        return to_delete, counts, perms_needed, protected

    # ------------------------------------------------------------------ columns

    @admin.display(description="next occurrence")
    def next_occurrence(self, schedule: Schedule) -> str:
        try:
            upcoming = next_occurrences(schedule, count=1)
        except Exception as exc:  # a row edited behind the admin's back: show, never crash
            return f"invalid: {exc}"
        return self._format(schedule, upcoming[0]) if upcoming else "\u2014"

    @admin.display(description="next 10 occurrences")
    def upcoming(self, schedule: Schedule) -> SafeString | str:
        if schedule.pk is None:
            return "\u2014"
        try:
            times = next_occurrences(schedule, count=10)
        except Exception as exc:
            return f"invalid: {exc}"
        items = format_html_join("", "<li>{}</li>", ((self._format(schedule, t),) for t in times))
        return format_html('<ol class="leasejobs-upcoming">{}</ol>', items)

    @admin.display(description="occurrences")
    def occurrences_link(self, schedule: Schedule) -> SafeString | str:
        if schedule.pk is None:
            return "\u2014"
        url = with_database(
            reverse("admin:django_leasejobs_schedule_occurrences", args=[schedule.pk])
        )
        return format_html('<a href="{}">occurrences and their jobs</a>', url)

    def _format(self, schedule: Schedule, at: Any) -> str:
        return str(at.astimezone(occurrences.schedule_zone(schedule)).strftime("%Y-%m-%d %H:%M %Z"))

    # ------------------------------------------------------------------ actions

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[Schedule], on: bool) -> None:
        word = "Enabled" if on else "Disabled"
        changed = 0
        for schedule in queryset.exclude(enabled=on):
            Schedule.objects.using(job_database()).filter(pk=schedule.pk).update(enabled=on)
            self.log_change(request, schedule, f"{word} schedule {schedule.name}.")
            changed += 1
        self.message_user(request, f"{word}: {changed} schedule(s).")

    @admin.action(description="Enable selected schedules", permissions=["change"])
    def enable_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected schedules", permissions=["change"])
    def disable_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._set_enabled(request, queryset, False)

    # ------------------------------------------------------------------ occurrence view

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/occurrences/",
                self.admin_site.admin_view(self.occurrences_view),
                name="django_leasejobs_schedule_occurrences",
            ),
            *super().get_urls(),
        ]

    def occurrences_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Read-only: each occurrence in the chosen range beside its job, gaps marked."""
        if not self.has_view_permission(request):
            return HttpResponse("You may not view schedules.", status=403)
        pk = row_id(object_id)
        if pk is None:
            return HttpResponse("Not a schedule id.", status=404)
        schedule = get_object_or_404(Schedule.objects.using(job_database()), pk=pk)
        now = occurrences.database_now()
        zone = occurrences.schedule_zone(schedule)
        base = reverse("admin:django_leasejobs_schedule_occurrences", args=[schedule.pk])
        fmt = occurrences.INPUT_FORMAT
        error, table, links = "", None, {}
        start = end = None
        try:
            start, end = occurrences.parse_range(
                schedule, request.GET.get("start"), request.GET.get("end"), now
            )
            table = occurrences.page_between(
                schedule,
                start,
                end,
                after=occurrences.parse_cursor(request.GET.get("after"), "after"),
                until=occurrences.parse_cursor(request.GET.get("until"), "until"),
            )
            # The exact instants: a page of "the last 24 hours" keeps the range it was cut from.
            query = {"start": start.isoformat(), "end": end.isoformat()}
            links = occurrences.page_links(base, query, table)
            links = {key: with_database(link) for key, link in links.items()}
        except occurrences.RangeError as exc:
            error = str(exc)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Occurrences of {schedule.name}",
            "schedule": schedule,
            "change_url": with_database(
                reverse("admin:django_leasejobs_schedule_change", args=[schedule.pk])
            ),
            "table": table,
            "rows": table.rows if table else [],
            "total": table.shown if table and table.whole else None,
            "gaps": table.gaps if table else 0,
            "links": links,
            "error": error,
            "start": start.astimezone(zone).strftime(fmt) if start else request.GET.get("start"),
            "end": end.astimezone(zone).strftime(fmt) if end else request.GET.get("end"),
            "zone": str(zone),
            "quick": [
                (label, with_database(link))
                for label, link in occurrences.quick_links(base, now, zone)
            ],
            "page_size": occurrences.PAGE_SIZE,
        }
        return TemplateResponse(
            request,
            "admin/django_leasejobs/schedule/occurrences.html",
            context,
            status=400 if error else 200,
        )
