"""What every leasejobs admin shares: rows are read-only, and operator actions are guarded.

An operator action changes state only through :mod:`django_leasejobs.protocol`, only on POST
(the admin's views are CSRF-protected), only with its own permission, and is written to the
admin log. A refused action (wrong state, missing permission) changes nothing and says why.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import smart_split, unescape_string_literal
from django.utils.translation import gettext as _

from . import display
from .databases import PARAM, DatabasePages, with_database
from .replica_lists import ReplicaLists

PERMISSIONS = {
    "cancel": "cancel_job",
    "run_now": "run_job_now",
    "replay": "replay_deadletter",
    "replay_group": "replay_deadletter_group",
    "discard_group": "discard_deadletter_group",
    "cancel_run": "cancel_workflowrun",
}
"""Operator permission name (as used by ``allowed_permissions``) -> model permission codename."""


class NulRefusingChangeList(ChangeList):
    """Django's change list, taking a filter value that holds a NUL character (``?queue=%00``)
    as an invalid lookup: Django then shows the list unfiltered, flagged ``?e=1``. No stored
    name holds one, and PostgreSQL's driver refuses to send one: a server error before.

    ``?database=`` chooses the queue database the list reads (:mod:`.databases`), no field:
    it is kept in the list's links but never taken as a filter."""

    def get_filters_params(self, params: Any = None) -> Any:
        lookup_params = super().get_filters_params(params)
        lookup_params.pop(PARAM, None)
        return lookup_params

    def get_filters(self, request: HttpRequest) -> Any:
        for values in self.get_filters_params().values():
            if any("\x00" in value for value in (values if isinstance(values, list) else [values])):
                raise IncorrectLookupParameters("A filter value holds a NUL character.")
        return super().get_filters(request)


MAX_WORDS = 10
"""A list's search takes its first this many distinct words (a message says so when it had
more).

Django's search adds a condition per word that every row must meet, and the statement's cost
grew with the square of their count: 600 words took 5.3 s of database time on the job list,
and SQLite refuses a statement past about 1,100 words ("Expression tree is too large"), which
the admin answered with a server error. Past a few words more only repeat what the first ones
matched (a row has few searched fields); ten leave room for parts of a name and for quoted
phrases."""


def first_words(request: HttpRequest, text: str) -> list[str]:
    """The search's words as Django's admin splits them (a quoted phrase is one word, kept
    as typed, quotes and all), each counted once, the first ``MAX_WORDS`` only; a message
    tells the user when there were more."""
    words: dict[str, str] = {}
    for token in smart_split(text):
        quoted = token[0] in "\"'" and token[-1] == token[0]
        word = unescape_string_literal(token) if quoted else token
        if word:
            words.setdefault(word, token)  # a word given twice finds nothing more
    if len(words) > MAX_WORDS:
        messages.warning(
            request,
            f"The search used its first {MAX_WORDS} words only (it had {len(words):,}): "
            "every word must match, and more words rarely narrow the list further.",
        )
    return list(words.values())[:MAX_WORDS]


class CappedSearch:
    """A change list's search of its first ``MAX_WORDS`` words, then Django's own."""

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> Any:
        capped = " ".join(first_words(request, search_term))
        return super().get_search_results(request, queryset, capped)  # type: ignore[misc]


class NulRefusingLists(CappedSearch):
    """For every leasejobs ModelAdmin: its change list is a :class:`NulRefusingChangeList`,
    and its search takes its first words (:class:`CappedSearch`)."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return NulRefusingChangeList


def has_operator_permission(request: HttpRequest, name: str) -> bool:
    """Does the user hold the specific permission for operator action ``name``?"""
    return request.user.has_perm(f"django_leasejobs.{PERMISSIONS[name]}")


class ReadOnlyAdmin(DatabasePages, ReplicaLists, NulRefusingLists, admin.ModelAdmin):
    """Rows change only through the protocol, never through an admin form; the pages show
    the queue database ``?database=`` names (:mod:`.databases`), and the lists read a replica
    when one is configured (:mod:`.replica_lists`)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # ``allowed_permissions = ("cancel",)`` on an action calls ``has_cancel_permission``.
    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return has_operator_permission(request, "cancel")

    def has_run_now_permission(self, request: HttpRequest) -> bool:
        return has_operator_permission(request, "run_now")

    def has_replay_permission(self, request: HttpRequest) -> bool:
        return has_operator_permission(request, "replay")

    def action_checkbox(self, obj: Any) -> SafeString:
        """Django's checkbox, written directly: rendering a form widget through the template
        engine for each of 50 rows was a third of a list page's time (docs/benchmarks.md)."""
        label = format_html(_("Select this object for an action - {}"), str(obj))
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            label,
        )

    def require(self, request: HttpRequest, name: str) -> None:
        """Refuse (403) a custom view's request without the action's permission or a POST."""
        if not self.has_view_permission(request) or not has_operator_permission(request, name):
            raise PermissionDenied(f"You do not have permission to {name.replace('_', ' ')}.")

    def change_url(self, obj: Model) -> str:
        opts = obj._meta
        return with_database(
            reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        )

    def back_to(self, obj: Model) -> HttpResponseRedirect:
        return HttpResponseRedirect(self.change_url(obj))

    def done(self, request: HttpRequest, obj: Model, text: str) -> None:
        """Report a state change to the user and write it to the admin log."""
        self.log_change(request, obj, text)
        self.message_user(request, text, messages.SUCCESS)

    def refused(self, request: HttpRequest, text: str) -> None:
        self.message_user(request, text, messages.ERROR)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The detail page, with :meth:`detail_context` for its row (a missing row: Django's)."""
        context = dict(extra_context or {})
        obj = self.get_object(request, object_id)
        if obj is not None:
            context.update(self.detail_context(request, obj))
        return super().change_view(request, object_id, form_url, context)

    def detail_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        """What a detail page's template adds for ``obj`` (its action buttons); none here."""
        return {}


class PayloadDisplay:
    """Detail-page fields of a row that carries a job's call and its attempt history: a job
    and its dead letter show them the same way."""

    @admin.display(description="args")
    def args_json(self, row: Any) -> SafeString:
        return display.pretty_json(row.args)

    @admin.display(description="kwargs")
    def kwargs_json(self, row: Any) -> SafeString:
        return display.pretty_json(row.kwargs)

    @admin.display(description="error history")
    def history(self, row: Any) -> SafeString:
        return display.error_history(row.errors)


def fieldset_fields(fieldsets: Any) -> tuple[str, ...]:
    """Every field named in ``fieldsets``, in order: a read-only detail page shows them all."""
    return tuple(name for _, options in fieldsets for name in options["fields"])
