"""The dashboard page: per-queue depth, running, oldest due age, dead letters, expired leases.

Numbers come from :func:`django_leasejobs.stats.collect`, the same query module as ``jobstats``,
``checkjobs`` and the health view, so every face agrees on what "due" and "expired" mean.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from .. import stats
from . import display

COLUMNS = (
    ("pending", "pending"),
    ("due", "due now"),
    ("running", "running"),
    ("failed", "failed (retry waiting)"),
    ("oldest_due_age", "oldest due age"),
    ("dead_last_hour", "dead, last hour"),
    ("dead_last_day", "dead, last day"),
    ("expired_leases", "expired leases"),
)
ALERT_AGE_SECONDS = 60.0
"""An oldest due age above this is highlighted: jobs are waiting longer than a poll or two."""


def _cells(numbers: Any) -> list[dict[str, Any]]:
    cells = []
    for field, _ in COLUMNS:
        value = getattr(numbers, field)
        if field == "oldest_due_age":
            alert = value > ALERT_AGE_SECONDS
            text = display.human_duration(value) if value else "0"
        else:
            alert = field in ("expired_leases", "dead_last_hour") and value > 0
            text = str(value)
        cells.append({"field": field, "text": text, "alert": alert})
    return cells


def dashboard_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Read-only; needs the permission to view jobs."""
    if not model_admin.has_view_permission(request):
        return HttpResponse("You may not view jobs.", status=403)
    numbers = stats.collect()
    rows = [{"queue": name, "cells": _cells(q)} for name, q in sorted(numbers.queues.items())]
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": "Queue dashboard",
        "columns": [label for _, label in COLUMNS],
        "rows": rows,
        "total": _cells(numbers.total),
        "taken_at": getattr(numbers, "now", None),
    }
    return TemplateResponse(request, "admin/django_leasejobs/dashboard.html", context)
