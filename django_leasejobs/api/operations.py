"""Dead letters (list, get, replay as is or edited), schedules and their occurrences, queue
stats and the health verdict: the admin's other pages, as JSON."""

from __future__ import annotations

import datetime as dt
from itertools import islice, takewhile

from django.contrib.admin.models import ADDITION
from django.http import HttpRequest, JsonResponse

from .. import protocol
from ..core import cron
from ..core.occurrences import cron_of
from ..errors import InvalidTransitionError, JobArgumentsError, JobValidationError, ScheduleError
from ..models import DeadLetter, Schedule
from ..models.databases import read_database
from ..reports import stats, workflow_reads
from ..reports.health import Thresholds, evaluate
from ..reports.occurrences import history_of
from ..runtime import inprocess
from . import inputs, serialize
from .endpoint import audit
from .errors import ApiError
from .jobs import allowed, get_row, page

MAX_OCCURRENCE_RANGE = dt.timedelta(days=31)
"""As the admin's occurrence page: a wider range is refused, not computed."""


def list_dead_letters(request: HttpRequest) -> JsonResponse:
    params = inputs.query(request, ("name", "queue", "replayed", "limit", "cursor"))
    rows = DeadLetter.objects.using(read_database()).order_by("-id")  # a replica's, if set
    for name in ("queue", "name"):
        value = inputs.name_filter(params, name)
        if value is not None:
            rows = rows.filter(**{name: value})
    replayed = inputs.choice(params, "replayed", ("true", "false"))
    if replayed is not None:
        rows = rows.filter(replayed_job__isnull=replayed == "false")
    return page(params, rows, serialize.dead_letter)


def get_dead_letter(request: HttpRequest, dead_letter_id: int) -> JsonResponse:
    return JsonResponse(serialize.dead_letter(get_row(DeadLetter, dead_letter_id, "dead letter")))


def replay(request: HttpRequest, dead_letter_id: int) -> JsonResponse:
    """A new job from the dead letter (201), with its arguments or the edited ones given."""
    document = inputs.body(request, optional=True)
    edits = inputs.json_object({} if document is None else document, ("args", "kwargs"))
    letter = get_row(DeadLetter, dead_letter_id, "dead letter")
    if edits and not allowed(letter.name):
        # New arguments make a new call: only a job the API exposes may be called with them.
        # As-is replays stay open to replay_deadletter, as in the admin.
        raise ApiError(
            "permission_denied",
            f"{letter.name!r} is not on the API's allow-list (LEASEJOBS_API_JOBS or "
            "@job(api=True)): it can be replayed with edited arguments in the admin only.",
        )
    if letter.replayed_job_id is not None:
        raise ApiError(
            "already_replayed",
            f"Dead letter #{letter.pk} was already replayed as job #{letter.replayed_job_id}.",
        )
    try:
        job = protocol.replay(letter.pk, args=edits.get("args"), kwargs=edits.get("kwargs"))
    except JobArgumentsError as exc:  # edited arguments the handler could not take
        raise ApiError("invalid", str(exc), exc.field) from None
    except JobValidationError as exc:
        field = next((f for f in ("kwargs", "args") if str(exc).startswith(f)), None)
        raise ApiError("invalid", str(exc), field) from None
    except InvalidTransitionError as exc:
        raise ApiError("invalid_state", str(exc)) from None
    inprocess.enqueued(job)
    edited = " with edited arguments" if edits else ""
    audit(request, letter, f"Replayed{edited} as job #{job.pk}")
    audit(request, job, f"Created by replay of dead letter #{letter.pk}{edited}", ADDITION)
    return JsonResponse(serialize.job(job), status=201)


def list_schedules(request: HttpRequest) -> JsonResponse:
    params = inputs.query(request, ("limit", "cursor"))
    return page(params, Schedule.objects.using(read_database()).order_by("-id"), serialize.schedule)


def occurrences(request: HttpRequest, schedule_id: int) -> JsonResponse:
    """Occurrences ``start < t <= end`` beside their jobs; ``next_start`` continues a long range."""
    params = inputs.query(request, ("start", "end", "limit"))
    schedule = get_row(Schedule, schedule_id, "schedule")
    bounds = {}
    for name in ("start", "end"):
        if name not in params:
            raise ApiError("invalid_parameter", f"{name} is required.", name)
        value = inputs.datetime_value(params[name], name)
        if value.tzinfo is None:
            raise ApiError("invalid_parameter", f"{name} needs a UTC offset (Z or +hh:mm).", name)
        bounds[name] = value
    start, end = bounds["start"], bounds["end"]
    # end - start, not start + 31 days: that sum overflows in December 9999.
    if not (start < end and end - start <= MAX_OCCURRENCE_RANGE):
        raise ApiError(
            "invalid_parameter",
            f"end must be after start, by at most {MAX_OCCURRENCE_RANGE.days} days.",
            "end",
        )
    size = inputs.limit(params)
    try:
        expression = cron_of(schedule)
    except ScheduleError as exc:
        raise ApiError("invalid_state", f"The schedule cannot be read: {exc}") from None
    for name, value in bounds.items():
        if not cron.representable(value, expression.tz):
            raise ApiError(
                "invalid_parameter",
                f"{name} {params[name]} falls outside the years 1 to 9999 in UTC or in the "
                f"schedule's timezone ({expression.timezone}).",
                name,
            )
    upcoming = expression.after(start)
    expected = list(islice(takewhile(lambda t: t <= end, upcoming), size + 1))
    more = len(expected) > size
    expected = expected[:size]
    history = history_of(schedule, expected)
    return JsonResponse(
        {
            "schedule": serialize.schedule(schedule),
            "results": [serialize.occurrence(item) for item in history],
            "next_start": serialize.iso(expected[-1]) if more else None,
        }
    )


def queue_stats(request: HttpRequest) -> JsonResponse:
    inputs.query(request, ())
    return JsonResponse(
        {
            **stats.collect().as_dict(),
            "workflow_runs": workflow_reads.counts_as_dict(read_database()),
        }
    )


def health(request: HttpRequest) -> JsonResponse:
    """The verdict of the ``LEASEJOBS_HEALTH_*`` thresholds: 200 ``ok``, 503 ``unhealthy``."""
    inputs.query(request, ())
    result = stats.collect()
    thresholds = Thresholds.from_settings()
    problems = evaluate(result, thresholds)
    body = {
        "status": "unhealthy" if problems else "ok",
        "problems": [problem.as_dict() for problem in problems],
        "thresholds": thresholds.as_dict(),
        **result.as_dict(),
        "workflow_runs": workflow_reads.counts_as_dict(read_database()),
    }
    return JsonResponse(body, status=503 if problems else 200)
