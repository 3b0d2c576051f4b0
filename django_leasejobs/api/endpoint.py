"""One path, its methods, and what each needs: the wrapper around every API view.

It routes by HTTP method, authenticates, checks the Django permissions of the action, and
turns every failure into the JSON error envelope (``errors``), a database outage into 503 and
anything unexpected into 500 (logged), so a client never gets an HTML page from the API.
It also runs the view in the queue database ``?database=`` names (``using_database``), once
the caller is known: the views read and write through ``job_database`` and never name one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import CHANGE, LogEntry
from django.db import InterfaceError, OperationalError
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from ..models.databases import home_database, job_database, using_database
from . import auth, inputs
from .errors import ApiError, error_response

logger = logging.getLogger("django_leasejobs")

View = Callable[..., HttpResponse]


@dataclass(frozen=True)
class Action:
    """A view for one method of a path, and the permissions its caller must hold."""

    view: View
    permissions: tuple[str, ...] = ()
    public: bool = False
    """No authentication at all (the OpenAPI document)."""
    database: bool = True
    """Takes ``?database=``; ``False`` for an enqueue, which its queue routes (a
    ``database`` parameter is then refused rather than silently ignored)."""


def resource(**methods: Action) -> View:
    """The Django view for one path: ``resource(GET=Action(...), POST=Action(...))``.

    CSRF-exempt for Django's middleware only because ``auth.authenticate`` runs the same
    check itself for session callers and answers in JSON.
    """

    @csrf_exempt
    @never_cache
    def handle(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        action = methods.get(request.method or "")
        try:
            if action is None:
                raise ApiError(
                    "method_not_allowed",
                    f"{request.method} is not allowed here; use {', '.join(methods)}.",
                    headers={"Allow": ", ".join(methods)},
                )
            user = None if action.public else auth.authenticate(request)
            if user is not None:
                auth.require(user, action.permissions)
            request.api_user = user  # type: ignore[attr-defined]
            if action.public:
                return action.view(request, **kwargs)
            with using_database(_database(request, action)):
                return action.view(request, **kwargs)
        except ApiError as exc:
            return exc.response()
        except (OperationalError, InterfaceError):  # not DataError: that would be our bug
            logger.exception("api: database error on %s %s", request.method, request.path)
            return error_response("database_unavailable", "The database could not be reached.")
        except Exception:
            logger.exception("api: unexpected error on %s %s", request.method, request.path)
            return error_response("server_error", "Unexpected error; see the server log.")

    return handle


def _database(request: HttpRequest, action: Action) -> str | None:
    """The queue database the action works on: ``?database=``, checked; ``None``: the home one."""
    if action.database:
        return inputs.database(request)
    if "database" in request.GET:
        raise ApiError(
            "unknown_parameter",
            "An enqueue is written in its queue's database (LEASEJOBS_QUEUE_DATABASES): "
            "this operation takes no database parameter.",
            "database",
        )
    return None


@csrf_exempt  # else a POST to a wrong path got the CSRF middleware's HTML 403 page
def not_found(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """Every other path under the API's prefix: JSON, not Django's HTML 404 page."""
    return error_response("not_found", f"No API endpoint at {request.path}.")


def audit(request: HttpRequest, obj: Model, message: str, flag: int = CHANGE) -> None:
    """Write the action to the admin log (LogEntry), as the admin's own actions are; naming
    the queue database when not the home one, since ids repeat across them."""
    user = request.api_user  # type: ignore[attr-defined]
    alias = obj._state.db or job_database()
    where = f" in database {alias!r}" if alias != home_database() else ""
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[obj],
        action_flag=flag,
        change_message=f"{message}{where} (API)",
        single_object=True,
    )
