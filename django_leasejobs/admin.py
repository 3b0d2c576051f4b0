"""Read-only admin for jobs, dead letters and schedules; operator actions come later."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import DeadLetter, Job, Schedule


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows change only through the lifecycle module, never through an admin form."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "name",
        "status",
        "queue",
        "priority",
        "run_at",
        "attempt",
        "max_attempts",
        "lease_owner",
        "lease_expires_at",
    )
    list_filter = ("status", "queue")
    search_fields = ("=id", "name", "dedupe_key")


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "reason", "created_at", "replayed_job")
    search_fields = ("name", "reason")


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    list_display = ("name", "cron", "timezone", "job", "enabled", "last_occurrence_at")
