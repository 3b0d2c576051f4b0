"""The lease advisor page: each job name's runtimes, lease, heartbeat and a suggestion.

Numbers come from :func:`django_leasejobs.reports.advisor.collect`, the same as
``jobstats --leases`` and the ``W005``/``W006`` checks, so the page, the command and the checks
agree. Read-only: it needs the permission to view jobs, nothing more.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from ..reports import advisor, replica_lag
from ..reports.lease_advice import seconds_text
from .replica_lists import show_lag


def _seconds(value: float | None) -> str:
    return "\u2014" if value is None else seconds_text(value)


def _row(job: advisor.JobLeases) -> dict[str, Any]:
    suggestion = job.suggestion
    warnings = []
    if job.p99_over_lease and job.heartbeat_off:
        warnings.append("p99 exceeds the lease and no heartbeat renews it (W005)")
    if job.too_stale:
        warnings.append(f"stale reports are {job.stale_share:.1%} of the last day's runs (W006)")
    return {
        "name": job.name,
        "runs": job.runs,
        "runtimes": [_seconds(value) for value in (job.p50, job.p95, job.p99, job.max)],
        "lease": _seconds(job.lease),
        "heartbeat": "off" if job.heartbeat_off else _seconds(job.heartbeat),
        "stale": job.stale,
        "recovered": job.recovered,
        "suggested_lease": _seconds(suggestion.lease if suggestion else None),
        "suggested_heartbeat": _seconds(suggestion.heartbeat if suggestion else None),
        "reason": job.reason,
        "warnings": warnings,
    }


def leases_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Needs the permission to view jobs (view-only staff may read it)."""
    if not model_admin.has_view_permission(request):
        return HttpResponse("You may not view jobs.", status=403)
    show_lag(request, replica_lag.read())  # the runs are counted on the replica, if set
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": "Lease advisor",
        "window_days": advisor.WINDOW.days,
        "rows": [_row(job) for job in advisor.collect()],
    }
    return TemplateResponse(request, "admin/django_leasejobs/leases.html", context)
