"""API tokens in the admin: make one (its secret is shown on the next page, once), revoke.

A token acts as its user with all of that user's permissions, so who a token may be made for
is the whole security of this page: a staff user makes tokens for themselves only, and sees
and revokes only their own; a superuser may make one for any user, and the admin log says
who made it for whom. ``manage.py jobapitoken create`` is a command run by whoever already
holds the server: it is trusted and may make a token for anyone.
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from ..models import ApiToken
from ..upkeep import api_tokens as tokens
from .base import NulRefusingLists


def _may_choose_user(request: HttpRequest) -> bool:
    return bool(request.user.is_superuser)


@admin.register(ApiToken)
class ApiTokenAdmin(NulRefusingLists, admin.ModelAdmin):
    list_display = (
        "id",
        "shown_prefix",
        "name",
        "user",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "prefix")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    actions = ("revoke_selected",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        """A staff user's own tokens; every token for a superuser."""
        tokens_shown = super().get_queryset(request)
        if _may_choose_user(request):
            return tokens_shown
        return tokens_shown.filter(user_id=request.user.pk)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            # Only a superuser chooses whose token it is; anyone else makes their own.
            return (
                ("user", "name", "expires_at")
                if _may_choose_user(request)
                else ("name", "expires_at")
            )
        return (
            "user",
            "name",
            "prefix",
            "created_at",
            "expires_at",
            "last_used_at",
            "revoked_at",
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A token is never edited: its user or expiry changing under a handed-out secret
        # would surprise whoever holds it. Make a new one and revoke the old.
        return () if obj is None else self.get_fields(request, obj)

    @admin.display(description="token")
    def shown_prefix(self, token: ApiToken) -> str:
        return f"{token.prefix}\u2026"

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if not change:
            if not _may_choose_user(request):
                # The form has no user field; whatever the POST says, it is the caller's.
                obj.user = cast(Any, request.user)
            secret = tokens.new_secret()
            obj.digest, obj.prefix = tokens.digest(secret), tokens.prefix_of(secret)
            request._leasejobs_secret = secret  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def construct_change_message(
        self, request: HttpRequest, form: Any, formsets: Any, add: bool = False
    ) -> Any:
        """The admin log's line for a new token says whose it is; the entry says who made it."""
        if add:
            token = form.instance
            return f"Created API token #{token.pk} for user {token.user} (id {token.user_id})."
        return super().construct_change_message(request, form, formsets, add)

    def response_add(
        self, request: HttpRequest, obj: ApiToken, post_url_continue: Any = None
    ) -> HttpResponse:
        """The only page that ever shows the secret: not a message, which a cookie would carry."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"API token #{obj.pk} created",
            "token": obj,
            "secret": request._leasejobs_secret,  # type: ignore[attr-defined]
        }
        return TemplateResponse(request, "admin/django_leasejobs/apitoken/created.html", context)

    @admin.action(description="Revoke selected API tokens", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = 0
        for token in queryset.order_by("pk"):
            if tokens.revoke(token.pk):
                self.log_change(request, token, "Revoked")
                revoked += 1
        self.message_user(request, f"Revoked {revoked} API token(s).", messages.SUCCESS)
