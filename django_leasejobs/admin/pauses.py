"""Pause and resume from the queue dashboard: a confirmation page, then the protocol's call.

Both need the ``pause_queue`` permission (besides viewing jobs) and a POST; the first POST
(from the dashboard's button or its job-name form) shows what will change and asks to confirm,
the second (``confirm=yes``) calls :mod:`django_leasejobs.protocol.pauses` and writes who did
it, and when, to the admin log. A hand-made POST without the permission changes nothing.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from .. import protocol
from ..errors import JobValidationError
from ..models import Pause, PauseKind

PERMISSION = "django_leasejobs.pause_queue"
ACTIONS = ("pause", "resume")


def may_pause(model_admin: admin.ModelAdmin, request: HttpRequest) -> bool:
    """May this user see and use the pause and resume buttons?"""
    return bool(model_admin.has_view_permission(request) and request.user.has_perm(PERMISSION))


def pause_view(model_admin: admin.ModelAdmin, request: HttpRequest, action: str) -> HttpResponse:
    """POST only (the URL is wrapped in ``require_POST``); confirms, then pauses or resumes."""
    if action not in ACTIONS or not may_pause(model_admin, request):
        raise PermissionDenied("You do not have permission to pause or resume queues.")
    kind = request.POST.get("kind", PauseKind.QUEUE)
    name = request.POST.get("name", "").strip()
    target = {"job": name} if kind == PauseKind.JOB else {"queue": name}
    dashboard = reverse("admin:django_leasejobs_dashboard")
    try:
        protocol.pauses.target(**target)
    except JobValidationError as exc:
        model_admin.message_user(request, str(exc), level="error")
        return HttpResponseRedirect(dashboard)
    label = f"{'job' if kind == PauseKind.JOB else 'queue'} {name}"
    if request.POST.get("confirm") != "yes":
        context = {
            **model_admin.admin_site.each_context(request),
            "opts": model_admin.opts,
            "title": f"{action.capitalize()} {label}?",
            "action": action,
            "kind": kind,
            "name": name,
            "label": label,
        }
        return TemplateResponse(request, "admin/django_leasejobs/pause_confirm.html", context)
    by = request.user.get_username()
    call = protocol.pause if action == "pause" else protocol.resume
    changed = call(**target, by=by)
    if changed is None:
        state = "already paused" if action == "pause" else "not paused"
        model_admin.message_user(request, f"{label.capitalize()} was {state}: nothing changed.")
        return HttpResponseRedirect(dashboard)
    text = f"{'Paused' if action == 'pause' else 'Resumed'} {label}."
    # Logged against the pause row (gone after a resume: its id and name still say which).
    row = Pause(pk=changed.id, kind=changed.kind, name=changed.name)
    model_admin.log_change(request, row, text)
    model_admin.message_user(request, text, level="success")
    return HttpResponseRedirect(dashboard)
