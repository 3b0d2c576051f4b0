"""Who is calling: a bearer token (``Authorization: Bearer ljt_...``) or the Django session.

A session caller's unsafe request (POST) must carry the CSRF token, exactly as a form in the
admin must: the browser sends the session cookie to any site's request, so without the check
another site could enqueue or cancel in the user's name. A bearer token is not sent by the
browser on its own, so token callers need no CSRF token. Either way the caller is a Django
user, and that user's permissions decide what the API lets them do.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware

from . import tokens
from .errors import ApiError

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class _CsrfCheck(CsrfViewMiddleware):
    """Django's own CSRF check, answering the reason instead of its HTML 403 page."""

    def _reject(self, request: HttpRequest, reason: str) -> Any:
        return reason


def _no_response(request: HttpRequest) -> HttpResponse:  # the check never calls it
    raise AssertionError("unreachable")


def authenticate(request: HttpRequest) -> Any:
    """The calling user; ``ApiError`` 401 (nobody, or a bad token) or 403 (CSRF)."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return tokens.user_for(credentials.strip())
    user = getattr(request, "user", None)  # no AuthenticationMiddleware: no session callers
    if user is None or not user.is_authenticated:
        raise ApiError(
            "not_authenticated",
            "Log in (session) or send Authorization: Bearer <API token>.",
            headers={"WWW-Authenticate": 'Bearer realm="leasejobs"'},
        )
    if request.method not in SAFE_METHODS:
        check = _CsrfCheck(_no_response)
        check.process_request(request)
        reason = check.process_view(request, _no_response, (), {})
        if reason:
            raise ApiError("csrf_failed", f"CSRF check failed: {reason}.")
    return user


def require(user: Any, permissions: tuple[str, ...]) -> None:
    """Refuse (403) a user without every one of these ``django_leasejobs`` permissions."""
    missing = [name for name in permissions if not user.has_perm(f"django_leasejobs.{name}")]
    if missing:
        raise ApiError(
            "permission_denied",
            f"This needs the permission(s) {', '.join(missing)} (django_leasejobs).",
        )
