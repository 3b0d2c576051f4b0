"""The schedule admin (read-only until the recurrence module lands)."""

from __future__ import annotations

from django.contrib import admin

from ..models import Schedule
from .base import ReadOnlyAdmin


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    list_display = ("name", "cron", "timezone", "job", "enabled", "last_occurrence_at")
