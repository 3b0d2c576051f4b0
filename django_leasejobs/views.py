"""The health view (JSON, 503 when a threshold is passed) and the optional Prometheus view.

Include them with ``path("jobs/", include("django_leasejobs.urls"))``. Both are unauthenticated
read-only pages, like most probe endpoints: they show queue names and counts, nothing from the
jobs' arguments. Put them behind your network policy, or wrap them (``staff_member_required``)
if queue names are sensitive.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from . import stats, validation
from .conf import settings
from .durations import parse_duration
from .errors import JobValidationError
from .health import Thresholds, evaluate

logger = logging.getLogger("django_leasejobs")

PARAMETERS = ("max_due_age", "max_dead_per_hour", "max_expired_leases", "queue")


@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    """Stats and a verdict: 200 ``ok``, 503 ``unhealthy``, 400 for a bad query parameter.

    Thresholds come from the ``LEASEJOBS_HEALTH_*`` settings; query parameters override them
    (``?max_due_age=5m&max_dead_per_hour=10&max_expired_leases=0&queue=mail``). With no
    threshold at all the view reports the numbers and answers 200.
    """
    try:
        thresholds = Thresholds.from_settings().override(**_thresholds(request.GET))
        queues = _queues(request.GET)
    except ValueError as exc:
        return JsonResponse({"status": "error", "error": str(exc)}, status=400)
    try:
        result = stats.collect()
    except DatabaseError:
        logger.exception("health: cannot read the jobs table")
        return JsonResponse(
            {"status": "unhealthy", "error": "cannot read the jobs table"}, status=503
        )
    problems = evaluate(result, thresholds, queues)
    body = {
        "status": "unhealthy" if problems else "ok",
        "problems": [problem.as_dict() for problem in problems],
        "thresholds": thresholds.as_dict(),
        **result.as_dict(),
    }
    return JsonResponse(body, status=503 if problems else 200)


def _thresholds(query: QueryDict) -> dict[str, Any]:
    unknown = sorted(set(query) - set(PARAMETERS))
    if unknown:
        raise ValueError(
            f"Unknown query parameter(s) {', '.join(unknown)}; use {', '.join(PARAMETERS)}."
        )
    values: dict[str, Any] = {}
    if "max_due_age" in query:
        try:
            values["max_due_age"] = parse_duration(
                str(query["max_due_age"]), bare_seconds=True
            ).total_seconds()
        except ValueError as exc:
            raise ValueError(f"max_due_age: {exc}") from None
    for name in ("max_dead_per_hour", "max_expired_leases"):
        if name in query:
            text = str(query[name])
            if not text.isdigit():
                raise ValueError(f"{name} must be a whole number of 0 or more, not {text!r}.")
            values[name] = int(text)
    return values


def _queues(query: QueryDict) -> set[str] | None:
    given = [name.strip() for item in query.getlist("queue") for name in item.split(",")]
    if not given:
        return None
    try:
        names = {validation.check_queue(name) for name in given}
    except JobValidationError as exc:
        raise ValueError(f"queue: {exc}") from None
    known = settings.QUEUES
    unknown = sorted(names - set(known)) if known is not None else []
    if unknown:
        raise ValueError(
            f"Unknown queue(s) {', '.join(unknown)}: "
            f"LEASEJOBS_QUEUES lists {', '.join(known or [])}."
        )
    return names


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format: the queue gauges and this process's state-change counters.

    Needs the ``metrics`` extra (prometheus-client); without it, ImproperlyConfigured says so.
    """
    from . import metrics as exporter

    body, content_type = exporter.render()
    return HttpResponse(body, content_type=content_type)
