"""Dead letters grouped by error: the grouped page, and replay or discard a whole group.

The page is one aggregate query (``protocol.groups``) and one read of each shown group's newest
letter. Replaying or discarding a group needs its own permission, asks first on a page that
says how many letters it will touch, acts only on the letters that page counted, and writes an
admin log entry per letter (and per new job, as a single replay does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from .. import protocol
from ..core.row_ids import row_id
from ..models import DeadLetter, Job
from . import display
from .base import has_operator_permission
from .databases import with_database

GROUPS_PER_PAGE = 100
REFUSALS_SHOWN = 10
"""Refused letters named in the message after a group's replay; the rest are counted."""

_ACTIONS = {
    "replay": ("replay_group", "Replay", "replayed"),
    "discard": ("discard_group", "Discard", "discarded"),
}


def _action_url(fingerprint: str, action: str) -> str:
    return with_database(
        reverse("admin:django_leasejobs_deadletter_group_action", args=[fingerprint, action])
    )


def _written_by_us(fingerprint: str) -> bool:
    """Whether the app wrote this fingerprint (hex digits); a row edited by hand may hold
    anything (``/``, spaces), for which no action URL is built: one bad row must not make
    the page a server error for everyone."""
    try:
        protocol.check_fingerprint(fingerprint)
    except ValueError:
        return False
    return True


def _log(request: HttpRequest, entries: list[tuple[Model, int, str]]) -> None:
    """One admin log entry per (object, action flag, message), written in one statement."""
    user_id = request.user.pk
    if user_id is None:  # the admin's views let only a signed-in user this far
        raise PermissionDenied("Sign in to change dead letters.")
    LogEntry.objects.bulk_create(
        LogEntry(
            user_id=user_id,
            content_type_id=ContentType.objects.get_for_model(obj, for_concrete_model=False).pk,
            object_id=str(obj.pk),
            object_repr=str(obj)[:200],
            action_flag=flag,
            change_message=text,
        )
        for obj, flag, text in entries
    )


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class DeadLetterGroupViews(_ModelAdmin):
    """Mixed into ``DeadLetterAdmin``: the grouped page and the two group actions."""

    def group_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("groups/", view(self.groups_view), name="django_leasejobs_deadletter_groups"),
            # ``path``: a fingerprint the app never wrote, ``/`` included, reaches the view
            # and its 404, rather than the admin's catch-all redirect.
            path(
                "groups/<path:fingerprint>/<str:action>/",
                view(self.group_action_view),
                name="django_leasejobs_deadletter_group_action",
            ),
        ]

    def _context(self, request: HttpRequest, title: str) -> dict[str, Any]:
        return {**self.admin_site.each_context(request), "opts": self.opts, "title": title}

    def groups_view(self, request: HttpRequest) -> HttpResponse:
        """Every group, the most recently seen first, with what it may do for this user."""
        if not self.has_view_permission(request):
            return HttpResponse("You may not view dead letters.", status=403)
        page = Paginator(protocol.groups(), GROUPS_PER_PAGE).get_page(request.GET.get("p"))
        errors = protocol.latest_errors(list(page.object_list))
        may = {
            name: has_operator_permission(request, perm) for name, (perm, _, _) in _ACTIONS.items()
        }
        changelist = reverse("admin:django_leasejobs_deadletter_changelist")
        rows = []
        for group in page.object_list:
            label, message = errors.get(group.fingerprint, ("", ""))
            key = group.fingerprint
            actionable = _written_by_us(key)
            rows.append(
                {
                    "group": group,
                    "label": label,
                    "message": display.truncated(message, 300),
                    # Joined here: a template loop over every name of every group is slow.
                    "names": format_html_join(
                        mark_safe("<br>"), "{}&nbsp;({})", ((n, c) for n, c in group.names)
                    ),
                    "letters_url": with_database(f"{changelist}?{urlencode({'fingerprint': key})}"),
                    "replay_url": (
                        _action_url(key, "replay")
                        if may["replay"] and actionable and group.not_replayed > 0
                        else ""
                    ),
                    "discard_url": (
                        _action_url(key, "discard") if may["discard"] and actionable else ""
                    ),
                }
            )
        context = {
            **self._context(request, "Dead letters grouped by error"),
            "rows": rows,
            "groups_page": page,
            "total": page.paginator.count,
        }
        return TemplateResponse(request, "admin/django_leasejobs/deadletter/groups.html", context)

    def group_action_view(
        self, request: HttpRequest, fingerprint: str, action: str
    ) -> HttpResponse:
        """GET: how many letters the action will touch. POST: do it, up to the letters counted."""
        if action not in _ACTIONS:
            raise Http404("No such group action.")
        permission, verb, _ = _ACTIONS[action]
        if not self.has_view_permission(request) or not has_operator_permission(
            request, permission
        ):
            return HttpResponse(f"You may not {action} a group of dead letters.", status=403)
        try:
            protocol.check_fingerprint(fingerprint)
        except ValueError as exc:
            raise Http404(str(exc)) from None
        found = protocol.groups(fingerprint)
        if not found:
            raise Http404("No dead letter has this fingerprint (any more).")
        group = found[0]
        if request.method == "POST":
            through = row_id(request.POST.get("through_id", ""))
            if through is None:
                return HttpResponse("through_id must be a dead letter id.", status=400)
            if action == "replay":
                self._replay_group(request, fingerprint, through)
            else:
                self._discard_group(request, fingerprint, through)
            return HttpResponseRedirect(reverse("admin:django_leasejobs_deadletter_groups"))
        label, message = protocol.latest_errors([group]).get(fingerprint, ("", ""))
        context = {
            **self._context(request, f"{verb} a group of dead letters"),
            "group": group,
            "label": label,
            "message": display.truncated(message, 300),
            "action": action,
            "verb": verb,
            "count": group.not_replayed if action == "replay" else group.count,
            "skipped": group.count - group.not_replayed if action == "replay" else 0,
            "groups_url": with_database(reverse("admin:django_leasejobs_deadletter_groups")),
        }
        return TemplateResponse(
            request, "admin/django_leasejobs/deadletter/group_confirm.html", context
        )

    def _replay_group(self, request: HttpRequest, fingerprint: str, through_id: int) -> None:
        def log(done: list[tuple[int, int]]) -> None:
            letters = DeadLetter.objects.using(protocol.job_database()).in_bulk(
                [letter for letter, _ in done]
            )
            jobs = Job.objects.using(protocol.job_database()).in_bulk([job for _, job in done])
            entries: list[tuple[Model, int, str]] = []
            for letter_id, job_id in done:
                text = f"Replayed dead letter #{letter_id} as job #{job_id} (group {fingerprint})."
                entries.append((letters[letter_id], CHANGE, text))
                entries.append(
                    (jobs[job_id], ADDITION, f"Created by replay of dead letter #{letter_id}.")
                )
            _log(request, entries)

        result = protocol.replay_group(fingerprint, through_id=through_id, on_batch=log)
        count = len(result.replayed)
        if count or not result.refused:
            text = (
                f"Replayed {count} dead letter{'s' if count != 1 else ''} of group {fingerprint}."
            )
            self.message_user(request, text, messages.SUCCESS)
        if result.refused:
            named = "; ".join(f"#{pk}: {why}" for pk, why in result.refused[:REFUSALS_SHOWN])
            more = len(result.refused) - REFUSALS_SHOWN
            rest = f"; and {more} more (see each letter's page)" if more > 0 else ""
            self.message_user(
                request, f"Refused {len(result.refused)}: {named}{rest}", messages.ERROR
            )

    def _discard_group(self, request: HttpRequest, fingerprint: str, through_id: int) -> None:
        def log(letters: list[DeadLetter]) -> None:
            text = f"Discarded with group {fingerprint}, with its dead job."
            _log(request, [(letter, DELETION, text) for letter in letters])

        result = protocol.discard_group(fingerprint, through_id=through_id, on_batch=log)
        count = result.discarded
        text = f"Discarded {count} dead letter{'s' if count != 1 else ''} of group {fingerprint}."
        self.message_user(request, text, messages.SUCCESS)
        if result.kept:
            named = "; ".join(f"#{pk}: {why}" for pk, why in result.kept[:REFUSALS_SHOWN])
            self.message_user(request, f"Kept {len(result.kept)}: {named}", messages.WARNING)
