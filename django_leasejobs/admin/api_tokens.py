"""API tokens in the admin: make one (its secret is shown on the next page, once), revoke."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from ..api import tokens
from ..models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
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

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ("user", "name", "expires_at")
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
            secret = tokens.new_secret()
            obj.digest, obj.prefix = tokens.digest(secret), tokens.prefix_of(secret)
            request._leasejobs_secret = secret  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

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
