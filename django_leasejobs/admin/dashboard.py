"""The dashboard page: per-queue depth, running, oldest due age, dead letters, expired leases,
the workers (read-only: last seen, running jobs, stuck handlers), and the queues' history as
charts (:mod:`.charts`) over the last hour, day or week. With ``LEASEJOBS_READ_DATABASES`` the
numbers are the replica's, and the page says how far behind it is (``replica_lag``).

Numbers come from :func:`django_leasejobs.stats.collect`, the same query module as ``jobstats``,
``checkjobs`` and the health view, so every face agrees on what "due" and "expired" mean. A cell
is red when :func:`django_leasejobs.health.evaluate` reports it, so the page turns red exactly
when ``checkjobs`` fails and the health view answers 503 (a queue no live worker serves has no
column of its own: its oldest due age is red, the tooltip saying why).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from .. import protocol
from ..core.durations import format_age
from ..models import PauseKind
from ..reports import health, replica_lag, stats
from . import charts, display, pauses

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
FALLBACK = health.Thresholds(
    max_due_age=60.0, max_dead_per_hour=0, max_expired_leases=0, max_stuck=0
)
"""Used for a ``LEASEJOBS_HEALTH_*`` setting left at None: a page nobody configured should still
show a stalled queue (jobs waiting longer than a poll or two), a dead worker's lease, a new dead
letter or a stuck handler, which the probes, having no threshold, do not report."""

Reasons = dict[str, str]
"""Field -> why that cell of a row is red."""


def _alerts(numbers: stats.Stats) -> dict[str, Reasons]:
    """Per queue; the total row gets none, as each queue is judged on its own numbers."""
    configured = health.Thresholds.from_settings()
    thresholds = FALLBACK.override(**configured.as_dict())
    alerts: dict[str, Reasons] = {}
    for problem in health.evaluate(numbers, thresholds):
        alerts.setdefault(problem.queue, {})[problem.metric] = _reason(problem, configured)
    return alerts


def _reason(problem: health.Problem, configured: health.Thresholds) -> str:
    """Names the setting, so an operator knows where the limit comes from and how to change it."""
    why = (
        "no live worker serves this queue, due jobs waiting "
        if problem.metric == health.UNSERVED
        else ""
    )
    if configured.limit(problem.metric) is None:
        return f"{why}over {problem.limit_text} (dashboard default: {problem.setting} is not set)"
    return f"{why}over {problem.setting} ({problem.limit_text})"


def _cells(numbers: stats.QueueStats, reasons: Reasons) -> list[dict[str, Any]]:
    cells = []
    for field, _ in COLUMNS:
        value = getattr(numbers, field)
        reason = reasons.get(field, "")
        if field == "oldest_due_age" and health.UNSERVED in reasons:
            # No column of its own: a queue no live worker serves shows on its due age.
            reason = "; ".join(r for r in (reason, reasons[health.UNSERVED]) if r)
        if field == "oldest_due_age":
            text, why = (display.human_duration(value) if value else "0"), ""
        else:
            counted = numbers.counted(field)
            text, why = counted.text(), counted.why()
        title = "; ".join(part for part in (reason, why) if part)
        cells.append({"field": field, "text": text, "alert": bool(reason), "title": title})
    return cells


def _paused_cell(numbers: stats.QueueStats, reasons: Reasons) -> dict[str, Any]:
    """How long the queue has been paused ("no" when it is not), red past the limit."""
    age = numbers.paused_age
    reason = reasons.get("paused_age", "")
    text = "no" if age is None else f"paused {format_age(age)}"
    return {"text": text, "alert": bool(reason), "title": reason}


def _workers(numbers: stats.Stats, reasons: Reasons) -> list[dict[str, Any]]:
    """One row per worker; its stuck count is red while the workers' total passes the limit."""
    stuck_reason = reasons.get(health.STUCK, "")
    return [
        {
            "worker_id": w.worker_id,
            "host": f"{w.host} (pid {w.pid})",
            "queues": w.queues,
            "capacity": f"{w.concurrency} threads, {w.async_concurrency} async",
            "last_seen": format_age(w.last_seen_age) + (" (lost)" if w.lost else ""),
            "lost": w.lost,
            "running": w.running,
            "stuck": w.stuck,
            "stuck_title": stuck_reason if w.stuck and not w.lost else "",
            "version": w.version,
        }
        for w in numbers.workers
    ]


def dashboard_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Needs the permission to view jobs; the pause buttons need ``pause_queue`` too."""
    if not model_admin.has_view_permission(request):
        return HttpResponse("You may not view jobs.", status=403)
    numbers = stats.collect()  # the replica's, with LEASEJOBS_READ_DATABASES
    alerts = _alerts(numbers)
    rows = [
        {
            "queue": name,
            "cells": _cells(q, alerts.get(name, {})),
            "paused": _paused_cell(q, alerts.get(name, {})),
            "is_paused": q.paused_age is not None,
        }
        for name, q in sorted(numbers.queues.items())
    ]
    by = {p.name: p.paused_by for p in protocol.paused(PauseKind.JOB)}
    paused_jobs = [
        {"name": name, "age_text": format_age(age), "paused_by": by.get(name, "")}
        for name, age in sorted(numbers.paused_jobs.items())
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": "Queue dashboard",
        "columns": [label for _, label in COLUMNS],
        "rows": rows,
        "total": _cells(numbers.total, {}),
        "taken_at": getattr(numbers, "now", None),
        "paused_jobs": paused_jobs,
        "workers": _workers(numbers, alerts.get("", {})),
        "stuck": numbers.stuck,
        "may_pause": pauses.may_pause(model_admin, request),
        "history": charts.context(charts.chosen_range(request)),
        "replica": replica_lag.read(),
    }
    return TemplateResponse(request, "admin/django_leasejobs/dashboard.html", context)
