"""The job list's bulk actions: cancel, retry or delete every job its filters match.

Django's admin actions work on the rows ticked on one page; these work on the whole filtered
list. The changelist links to a confirmation page carrying its filters (and search) in the
query string; the page shows the dry run's count (``bulk.preview``), and its POST (CSRF
protected, permission checked again) runs ``bulk.run`` over the same filtered list up to the
last job it counted, writing one admin log entry. The list is the changelist's own queryset,
so what the page counts is what the list showed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from .. import bulk
from ..core.row_ids import row_id
from ..models import Job

LABELS = {"cancel": "Cancel", "retry": "Retry (replay)", "delete": "Delete"}
NOT_FILTERS = ("p", "o")
"""The changelist's paging and ordering parameters: no part of what it lists."""

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


def _may(request: HttpRequest, action: bulk.Action) -> bool:
    return bool(request.user.has_perm(f"django_leasejobs.{action.permission}"))


class BulkJobViews(_ModelAdmin):
    """Mixed into ``JobAdmin``: the links on the list and the confirmation page."""

    def bulk_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.bulk_view)
        return [path("bulk/<str:action>/", view, name="django_leasejobs_job_bulk")]

    def bulk_links(self, request: HttpRequest) -> list[dict[str, str]]:
        """The actions this user may take on the listed jobs, each keeping the list's filters."""
        query = request.GET.urlencode()
        return [
            {
                "label": f"{LABELS[name]} all matching\u2026",
                "url": reverse("admin:django_leasejobs_job_bulk", args=[name])
                + (f"?{query}" if query else ""),
                "slug": name,
            }
            for name, action in bulk.ACTIONS.items()
            if _may(request, action)
        ]

    def bulk_view(self, request: HttpRequest, action: str) -> HttpResponse:
        """GET: the count and a form. POST: act on the listed jobs up to the last one counted."""
        chosen = bulk.ACTIONS.get(action)
        if chosen is None:
            raise Http404("No such bulk action.")
        if not self.has_view_permission(request) or not _may(request, chosen):
            raise PermissionDenied(f"You may not {action} jobs.")
        rows = self._listed(request)
        if rows is None:
            return HttpResponse("The list's filters are not valid.", status=400)
        described = _described(request)
        back = reverse("admin:django_leasejobs_job_changelist")
        query = request.GET.urlencode()
        back_to_list = f"{back}?{query}" if query else back
        if request.method == "POST":
            user_id = request.user.pk
            if user_id is None:  # the admin's views let only a signed-in user this far
                raise PermissionDenied("Sign in to act on jobs.")
            through = row_id(request.POST.get("through_id", ""))
            if through is None:
                return HttpResponse("through_id must be a job id.", status=400)
            result = bulk.run(
                chosen,
                rows,
                user_id=user_id,
                description=described,
                source="admin",
                through_id=through,
            )
            self._report(request, chosen, result)
            return HttpResponseRedirect(back_to_list)
        counted = bulk.preview(chosen, rows)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{LABELS[action]} all matching jobs",
            "action": action,
            "verb": LABELS[action].split()[0],
            "count": counted.matched,
            "through_id": counted.through_id,
            "described": described,
            "statuses": _either(chosen.statuses),
            "back": back_to_list,
        }
        return TemplateResponse(request, "admin/django_leasejobs/job/bulk_confirm.html", context)

    def _listed(self, request: HttpRequest) -> QuerySet[Job] | None:
        """The changelist's queryset for these filters and search; None for invalid ones."""
        try:
            return self.get_changelist_instance(request).get_queryset(request)
        except IncorrectLookupParameters:
            return None

    def _report(self, request: HttpRequest, action: bulk.Action, result: bulk.Result) -> None:
        text = f"Bulk {action.name}: {result.matched} matched; {result.counts()}."
        self.message_user(request, text, messages.SUCCESS)
        if result.refusals:
            named = "; ".join(f"#{pk}: {why}" for pk, why in result.refusals[:10])
            self.message_user(request, f"Refused: {named}", messages.ERROR)


def _described(request: HttpRequest) -> str:
    """The list's filters as JSON, for the admin log (``{}``: every job)."""
    shown: dict[str, Any] = {
        key: request.GET.get(key) for key in sorted(request.GET) if key not in NOT_FILTERS
    }
    return json.dumps(shown, ensure_ascii=False)


def _either(statuses: Sequence[str]) -> str:
    """``pending, failed or running``: the statuses the action acts on, as a sentence says them."""
    *first, last = statuses
    return f"{', '.join(first)} or {last}" if first else last
