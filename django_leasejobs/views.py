"""The health view (JSON, 503 when a threshold is passed) and the optional Prometheus view.

Include them with ``path("jobs/", include("django_leasejobs.urls"))``. Safe by default: an
anonymous request to the health view gets the verdict only (the status code and ``ok`` or
``unhealthy``), so an uptime probe needs no secret; queue names and numbers, and the metrics,
need a *monitor*: the bearer token of ``LEASEJOBS_MONITORING_TOKEN`` or an active staff user
who may view jobs (the permission of the admin dashboard, which shows the same numbers).
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from .core import row_ids, validation
from .core.conf import settings
from .core.durations import parse_duration
from .errors import JobValidationError
from .reports import shards
from .reports.health import Problem, Thresholds

logger = logging.getLogger("django_leasejobs")

PARAMETERS = (
    "max_due_age",
    "max_dead_per_hour",
    "max_expired_leases",
    "max_paused_age",
    "max_stuck",
    "max_unserved_age",
    "max_unknown",
    "queue",
)
PERMISSION = "django_leasejobs.view_job"
"""What staff need to see the numbers: the admin dashboard asks the same."""


class WrongToken(Exception):
    """A bearer token that is not ours: refused, never downgraded to an anonymous request."""


def is_monitor(request: HttpRequest) -> bool:
    """The right bearer token, or an active staff user with :data:`PERMISSION`.

    Raises :class:`WrongToken` for any other bearer token (with no token configured, every one
    is wrong), so a scraper with a stale token fails loudly. Other ``Authorization`` schemes
    (a proxy's HTTP Basic login) are not ours and leave the request to the session.
    """
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        token = settings.MONITORING_TOKEN
        given = credentials.strip().encode("utf-8", "replace")
        if token is None or not hmac.compare_digest(given, token.encode()):
            raise WrongToken
        return True
    user = getattr(request, "user", None)  # no AuthenticationMiddleware: nobody is staff
    return bool(user is not None and user.is_active and user.is_staff and user.has_perm(PERMISSION))


def _refused(reason: str, status: int) -> JsonResponse:
    response = JsonResponse({"status": "error", "error": reason}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return response


def _wrong_token() -> JsonResponse:
    return _refused("The bearer token is not LEASEJOBS_MONITORING_TOKEN.", 401)


NEEDS_A_MONITOR = (
    "needs the bearer token of LEASEJOBS_MONITORING_TOKEN "
    "(Authorization: Bearer <token>) or a staff user who may view jobs."
)


@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    """Stats and a verdict: 200 ``ok``, 503 ``unhealthy``, 400 for a bad query parameter.

    Thresholds come from the ``LEASEJOBS_HEALTH_*`` settings; query parameters override them
    (``?max_due_age=5m&max_dead_per_hour=10&max_expired_leases=0&max_paused_age=1h&max_stuck=0``
    ``&max_unserved_age=2m&max_unknown=0&queue=mail``); the numbers include the live workers and
    their stuck handlers, and the jobs waiting for a worker that knows their name. A queue whose
    due jobs wait while no live worker serves it is judged by default
    (``LEASEJOBS_HEALTH_MAX_UNSERVED_AGE``, 60 s): its verdict costs no query more.
    With no threshold at all (every setting None) the view reports the numbers and answers
    200. Anyone but a monitor gets ``{"status": ...}`` alone and may pass no parameter:
    thresholds chosen by a stranger would read the numbers out one probe at a time.

    With several queue databases (``LEASEJOBS_QUEUE_DATABASES``) the verdict covers them all,
    one that cannot be read included; a monitor's answer names each problem's ``database``
    and gives each database's numbers under ``databases`` (:func:`_several`).
    """
    try:
        monitor = is_monitor(request)
    except WrongToken:
        return _wrong_token()
    if not monitor and request.GET:
        return _refused(f"Query parameters {NEEDS_A_MONITOR}", 403)
    try:
        thresholds = Thresholds.from_settings().override(**_thresholds(request.GET))
        queues = _queues(request.GET)
    except ValueError as exc:
        return JsonResponse({"status": "error", "error": str(exc)}, status=400)
    # A stranger's verdict counts no queue: its queries are as many with one queue as with
    # thousands (anyone who may enqueue can make queues). It is a probe's, read on each
    # database's primary: a lagging replica would show due jobs already done. A monitor's
    # numbers read the replica of LEASEJOBS_READ_DATABASES, its lag beside them.
    readings = shards.read_each(probe=not monitor, counts=monitor)
    for reading in readings:
        if reading.error is not None:
            logger.error(
                "health: cannot read the jobs table of %s",
                reading.database,
                exc_info=reading.error,
            )
    problems = shards.judge(readings, thresholds, queues)
    status = "unhealthy" if problems else "ok"
    if not monitor:
        return JsonResponse({"status": status}, status=_code(problems))
    if len(readings) > 1:
        return JsonResponse(
            _several(status, problems, thresholds, readings), status=_code(problems)
        )
    (reading,) = readings
    if reading.stats is None:
        return JsonResponse({"status": "unhealthy", "error": UNREADABLE}, status=503)
    body = {
        "status": status,
        "problems": [problem.as_dict() for problem in problems],
        "thresholds": thresholds.as_dict(),
        **reading.stats.as_dict(),
    }
    if reading.lag is not None:
        body["read_from"] = reading.lag.as_dict()
    return JsonResponse(body, status=_code(problems))


UNREADABLE = "cannot read the jobs table"


def _several(
    status: str,
    problems: list[Problem],
    thresholds: Thresholds,
    readings: list[shards.Reading],
) -> dict[str, Any]:
    """A monitor's answer with several queue databases: the verdict over all of them, each
    problem naming its database, the totals added up, and each database's own numbers (its
    clock, queues, workers, replica) under ``databases``, by alias, home first; one that
    could not be read has ``error`` instead."""
    databases: dict[str, Any] = {}
    for reading in readings:
        if reading.stats is None:
            databases[reading.database] = {"error": UNREADABLE}
            continue
        databases[reading.database] = reading.stats.as_dict()
        if reading.lag is not None:
            databases[reading.database]["read_from"] = reading.lag.as_dict()
    return {
        "status": status,
        "problems": [problem.as_dict() for problem in problems],
        "thresholds": thresholds.as_dict(),
        "total": shards.total(readings).as_dict(),
        "stuck": sum(r.stats.stuck for r in readings if r.stats is not None),
        "databases": databases,
    }


def _code(problems: list[Any]) -> int:
    return 503 if problems else 200


def _thresholds(query: QueryDict) -> dict[str, Any]:
    unknown = sorted(set(query) - set(PARAMETERS))
    if unknown:
        raise ValueError(
            f"Unknown query parameter(s) {', '.join(unknown)}; use {', '.join(PARAMETERS)}."
        )
    values: dict[str, Any] = {}
    for name in ("max_due_age", "max_paused_age", "max_unserved_age"):
        if name in query:
            try:
                values[name] = parse_duration(str(query[name]), bare_seconds=True).total_seconds()
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
    for name in ("max_dead_per_hour", "max_expired_leases", "max_stuck", "max_unknown"):
        if name in query:
            text = str(query[name])
            number = row_ids.whole_number(text, row_ids.MAX_ID)
            if number is None:
                raise ValueError(f"{name} must be a whole number of 0 or more, not {text!r}.")
            values[name] = number
    return values


def _queues(query: QueryDict) -> set[str] | None:
    given = [name.strip() for item in query.getlist("queue") for name in item.split(",")]
    if not given:
        return None
    try:
        names = {validation.check_queue(name) for name in given}
    except JobValidationError as exc:
        raise ValueError(f"queue: {exc}") from None
    validation.check_declared_queues(names)  # a JobValidationError is a ValueError
    return names


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format: the queue gauges and this process's state-change counters.

    For monitors only (see :func:`is_monitor`): 401 for a wrong token, 403 for anyone else.
    Needs the ``metrics`` extra (prometheus-client); without it, 501 with JSON naming it.
    """
    from . import metrics as exporter

    try:
        if not is_monitor(request):
            return _refused(f"The metrics view {NEEDS_A_MONITOR}", 403)
    except WrongToken:
        return _wrong_token()

    try:
        body, content_type = exporter.render()
    except ImproperlyConfigured as exc:  # no prometheus-client: the metrics extra is missing
        return _refused(str(exc), 501)
    return HttpResponse(body, content_type=content_type)
