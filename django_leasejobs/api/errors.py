"""The API's errors: every 4xx and 5xx is ``{"code": ..., "message": ..., "field": ...}``.

``code`` is stable (clients branch on it; the message may be reworded), ``field`` names the
input at fault (``priority``, ``jobs[2].queue``, the ``cursor`` parameter) or is null.
"""

from __future__ import annotations

from django.http import JsonResponse

CODES: dict[str, tuple[int, str]] = {
    "invalid": (400, "a field's value was refused (the message is the enqueue's own)"),
    "invalid_json": (400, "the body is not a JSON document"),
    "unknown_field": (400, "the body has a field this operation does not take"),
    "invalid_parameter": (400, "a query parameter's value was refused"),
    "unknown_parameter": (400, "a query parameter this operation does not take"),
    "batch_too_large": (400, "more jobs in one enqueue-many than LEASEJOBS_API_MAX_BATCH"),
    "not_authenticated": (401, "no session and no bearer token"),
    "invalid_token": (401, "a bearer token that is unknown, revoked or expired"),
    "permission_denied": (403, "the user lacks the Django permission the action needs"),
    "csrf_failed": (403, "a session caller's unsafe request without a valid CSRF token"),
    "not_found": (404, "no such row or path"),
    "unknown_job": (404, "a job name the API may not enqueue (not on the allow-list)"),
    "not_paused": (404, "a resume of a queue or job name that is not paused"),
    "method_not_allowed": (405, "the path does not take this HTTP method"),
    "invalid_state": (409, "the job's state does not allow the action (now)"),
    "already_replayed": (409, "the dead letter was replayed before"),
    "duplicate": (409, "a dedupe hit for a caller who may not view jobs: nothing enqueued"),
    "body_too_large": (413, "a body larger than LEASEJOBS_API_MAX_BODY_BYTES"),
    "unsupported_media_type": (415, "a body that is not application/json"),
    "server_error": (500, "an unexpected error; the server log has the traceback"),
    "database_unavailable": (503, "the database could not be reached"),
}
"""Every code the API answers with, its HTTP status, and what it means (docs/api.md)."""


class ApiError(Exception):
    """Raised anywhere below a view; ``endpoint`` turns it into the JSON error response."""

    def __init__(
        self,
        code: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field
        self.status = CODES[code][0]
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        return error_response(self.code, self.message, self.field, self.headers)


def error_response(
    code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JsonResponse:
    response = JsonResponse(
        {"code": code, "message": message, "field": field}, status=CODES[code][0]
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response
