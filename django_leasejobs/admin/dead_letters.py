"""The dead-letter admin: why a job died, its full history, and replay (as is or edited)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from .. import protocol
from ..core import fingerprints, registry, versions
from ..core.row_ids import row_id
from ..errors import InvalidTransitionError, JobValidationError
from ..models import DeadLetter
from . import display, json_input
from .base import PayloadDisplay, ReadOnlyAdmin
from .databases import with_database
from .dead_letter_groups import DeadLetterGroupViews
from .filters import JobNameFilter
from .paginator import CountingPaginator


class ReplayForm(forms.Form):
    """Edited arguments for a replay: JSON text, then validated exactly like an enqueue."""

    args = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80, "class": "leasejobs-code"}),
        help_text="A JSON list.",
    )
    kwargs = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80, "class": "leasejobs-code"}),
        help_text="A JSON object.",
    )

    def _json(self, field: str, kind: type, what: str) -> Any:
        value = json_input.load(self.cleaned_data[field])
        if not isinstance(value, kind):
            raise forms.ValidationError(f"{field} must be a JSON {what}.")
        return value

    def clean_args(self) -> list[Any]:
        return self._json("args", list, "list")

    def clean_kwargs(self) -> dict[str, Any]:
        return self._json("kwargs", dict, "object")


def replay_arguments(letter: DeadLetter) -> tuple[list[Any], dict[str, Any], str]:
    """The arguments the edit form starts from, and a note on their version.

    Edited arguments are stored at the handler's version (``protocol.replay``): a letter of
    an older version is shown upgraded by the job's ``@job(upgrade=)`` chain, so the operator
    edits arguments of the version they will be stored at. If the chain fails, the stored
    ones are shown, and the note says what to write.
    """
    job = letter.job
    spec = None if job.task_backend else registry.lookup(letter.name)
    if spec is None or job.version >= spec.version:
        return letter.args, letter.kwargs, ""
    stored = f"These arguments were written for version {job.version} of the job"
    try:
        args, kwargs = versions.upgrade(
            spec.name, spec.upgrade, letter.args, letter.kwargs, job.version, spec.version
        )
    except Exception as exc:
        note = (
            f"{stored}; upgrading them to version {spec.version} (the handler's) failed: "
            f"{exc}. Edited arguments are stored at version {spec.version}: write them as "
            f"version {spec.version} takes them (replaying as is keeps version {job.version})."
        )
        return letter.args, letter.kwargs, note
    note = (
        f"{stored}; they are shown upgraded to version {spec.version}, the handler's, at which "
        f"edited arguments are stored (replaying as is keeps version {job.version}, and a "
        "worker upgrades them)."
    )
    return args, kwargs, note


@admin.register(DeadLetter)
class DeadLetterAdmin(DeadLetterGroupViews, PayloadDisplay, ReadOnlyAdmin):
    list_display = (
        "id",
        "name",
        "job_link",
        "queue",
        "reason",
        "last_error",
        "created_at",
        "replayed_job_link",
    )
    list_display_links = ("id", "name")
    list_filter = ("reason", "queue", JobNameFilter, ("replayed_job", admin.EmptyFieldListFilter))
    search_fields = ("=job__id", "=fingerprint", "name", "reason")
    list_select_related = ("job", "replayed_job")
    list_per_page = 50
    show_full_result_count = False  # a storm of dead letters must not make the page count them
    paginator = CountingPaginator
    actions = ("replay_selected",)
    fields = (
        "id",
        "name",
        "queue",
        "reason",
        "created_at",
        "job_link",
        "replayed_job_link",
        "replayed_at",
        "fingerprint_link",
        "last_error_text",
        "args_json",
        "kwargs_json",
        "history",
    )
    readonly_fields = fields

    # ------------------------------------------------------------------ columns

    @admin.display(description="job")
    def job_link(self, letter: DeadLetter) -> SafeString | str:
        return display.admin_link(letter.job, f"#{letter.job_id}")

    @admin.display(description="replayed as", ordering="replayed_job")
    def replayed_job_link(self, letter: DeadLetter) -> SafeString | str:
        job = letter.replayed_job
        return display.admin_link(job, f"#{job.pk} ({job.status})" if job else None)

    @admin.display(description="fingerprint")
    def fingerprint_link(self, letter: DeadLetter) -> SafeString | str:
        """The group of letters the same error made: its letters, and the grouped page."""
        if not letter.fingerprint:
            return "not computed yet (manage.py deadletters fingerprint)"
        letters = reverse("admin:django_leasejobs_deadletter_changelist")
        # any text a row may hold, encoded
        query = urlencode({"fingerprint": letter.fingerprint})
        return format_html(
            '<a href="{}">{}</a> ({}) &middot; <a href="{}">all groups</a>',
            with_database(f"{letters}?{query}"),
            letter.fingerprint,
            fingerprints.of_errors(letter.errors).label,
            with_database(reverse("admin:django_leasejobs_deadletter_groups")),
        )

    def _last_error(self, letter: DeadLetter) -> str:
        errors = letter.errors if isinstance(letter.errors, list) else []
        last = errors[-1] if errors else {}
        return str(last.get("error", "")) if isinstance(last, dict) else str(last)

    @admin.display(description="last error")
    def last_error(self, letter: DeadLetter) -> str:
        return display.truncated(self._last_error(letter))

    @admin.display(description="last error")
    def last_error_text(self, letter: DeadLetter) -> SafeString:
        return display.preformatted(self._last_error(letter))

    # ------------------------------------------------------------------ replay

    def _replay(
        self,
        request: HttpRequest,
        letter: DeadLetter,
        args: list[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> bool:
        """Replay one dead letter, log it and say so; False (and a message) when refused."""
        if letter.replayed_job_id is not None:
            self.refused(
                request,
                f"Dead letter #{letter.pk} was already replayed as job #{letter.replayed_job_id}.",
            )
            return False
        try:
            job = protocol.replay(letter.pk, args=args, kwargs=kwargs)
        except (JobValidationError, InvalidTransitionError) as exc:
            self.refused(request, f"Dead letter #{letter.pk} was not replayed: {exc}")
            return False
        edited = " with edited arguments" if args is not None or kwargs is not None else ""
        self.done(request, letter, f"Replayed dead letter #{letter.pk}{edited} as job #{job.pk}.")
        self.log_addition(request, job, f"Created by replay of dead letter #{letter.pk}{edited}.")
        return True

    @admin.action(description="Replay selected dead letters", permissions=["replay"])
    def replay_selected(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        for letter in queryset.order_by("pk"):
            self._replay(request, letter)

    def get_urls(self) -> list[URLPattern]:
        return [
            *self.group_urls(),  # before "<path:object_id>/replay/", which would match them
            path(
                "<path:object_id>/replay/",
                self.admin_site.admin_view(self.replay_view),
                name="django_leasejobs_deadletter_replay",
            ),
            *super().get_urls(),
        ]

    def replay_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET: the edit-and-replay form. POST: replay as is (``as_is``) or with the form's
        arguments; invalid arguments re-show the form with the error and write nothing."""
        self.require(request, "replay")
        pk = row_id(object_id)
        if pk is None:
            return HttpResponse("Not a dead letter id.", status=404)
        letter = get_object_or_404(DeadLetter.objects.using(protocol.job_database()), pk=pk)
        if request.method == "POST" and "as_is" in request.POST:
            self._replay(request, letter)
            return self.back_to(letter)
        if letter.replayed_job_id is not None:
            self._replay(request, letter)  # refused with a message
            return self.back_to(letter)
        args, kwargs, version_note = replay_arguments(letter)
        if request.method == "POST":
            form = ReplayForm(request.POST)
            if form.is_valid():
                try:
                    job = protocol.replay(
                        letter.pk,
                        args=form.cleaned_data["args"],
                        kwargs=form.cleaned_data["kwargs"],
                    )
                except (JobValidationError, InvalidTransitionError) as exc:
                    form.add_error(None, str(exc))
                else:
                    text = (
                        f"Replayed dead letter #{letter.pk} with edited arguments as job #{job.pk}."
                    )
                    self.done(request, letter, text)
                    self.log_addition(
                        request, job, f"Created by replay of dead letter #{letter.pk}."
                    )
                    return self.back_to(job)
        else:
            form = ReplayForm(
                initial={
                    "args": json.dumps(args, indent=2, ensure_ascii=False),
                    "kwargs": json.dumps(kwargs, indent=2, ensure_ascii=False),
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "version_note": version_note,
            "opts": self.opts,
            "title": f"Replay dead letter #{letter.pk} with edited arguments",
            "letter": letter,
            "form": form,
            "change_url": self.change_url(letter),
        }
        return TemplateResponse(request, "admin/django_leasejobs/deadletter/replay.html", context)

    def detail_context(self, request: HttpRequest, letter: DeadLetter) -> dict[str, Any]:
        """The replay button, for a letter not replayed yet and a user who may replay."""
        if letter.replayed_job_id is not None or not self.has_replay_permission(request):
            return {}
        url = reverse("admin:django_leasejobs_deadletter_replay", args=[letter.pk])
        return {"leasejobs_replay_url": with_database(url)}
