"""List filters whose choices never scan the whole jobs table.

Django's default filter on a char field lists ``SELECT DISTINCT`` over every row, a full scan of
a table that may hold millions of finished jobs on each page load. The choices here come from the
registry and from index probes: the names of every row by a skip scan of ``leasejobs_name``
(one probe per name), the queues of live rows by a skip scan of ``leasejobs_waiting`` (one
probe per queue) and the running rows (as many as the workers hold). Filtering by any other
queue still works through the URL (``?queue=...``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ..core import registry
from ..core.conf import settings
from ..models import Job, Schedule, Status
from ..reports import stats
from . import job_search
from .databases import chosen
from .replica_lists import list_database


class JobNameFilter(admin.SimpleListFilter):
    title = "job name"
    parameter_name = "name"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        alias = list_database(request)
        names = job_search.known_names(request, alias) or sorted(registry.registered())
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(name=value) if value else queryset


class ScheduleFilter(admin.RelatedFieldListFilter):
    """Django's filter by schedule, whose choices are the schedules of the queue database the
    list shows (``?database=``): Django's would list the home database's."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> Any:
        if chosen() is None:
            return super().field_choices(field, request, model_admin)
        ordering = self.field_admin_ordering(field, request, model_admin) or ("name",)
        rows = Schedule.objects.using(list_database(request)).order_by(*ordering)
        return [(row.pk, str(row)) for row in rows]


class QueueFilter(admin.SimpleListFilter):
    title = "queue"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = {settings.DEFAULT_QUEUE}
        names.update(f.queue for f in registry.registered().values() if f.queue)
        names.update(stats.waiting_queues(list_database(request)))
        names.update(
            Job.objects.using(list_database(request))
            .filter(status=Status.RUNNING)
            .order_by()
            .values_list("queue", flat=True)
            .distinct()
        )
        return [(name, name) for name in sorted(names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(queue=value) if value else queryset
