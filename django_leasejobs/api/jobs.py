"""The job endpoints: enqueue (one or many), list, get, cancel, retry now.

Only names on the allow-list can be enqueued: ``LEASEJOBS_API_JOBS`` or ``@job(api=True)``.
Any other name is "not found" (404) whatever the caller's rights, so the API never runs a
job a project did not mean to expose, and does not say which other jobs exist.

An enqueue takes exactly the fields the OpenAPI document lists: the dedupe window and
conflict options (``dedupe_states``, ``dedupe_period``, ``on_conflict``) are the ``@job``'s to
set, never a caller's, so no caller can rewrite a pending job or read a finished one through
them. A dedupe hit answers with the job already holding the key only to a caller who may view
jobs; anyone else gets 409 ``duplicate`` and no row.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from django.contrib.admin.models import ADDITION
from django.db import transaction
from django.http import HttpRequest, JsonResponse

from .. import protocol
from ..core import fairness, json_values, registry, validation
from ..core.conf import settings
from ..errors import JobArgumentsError, JobValidationError
from ..models import CLAIMABLE, Job, Status
from ..models.databases import read_database, using_database
from ..protocol import routes
from ..runtime import inprocess
from . import inputs, serialize
from .endpoint import audit
from .errors import ApiError
from .schema_components import ENQUEUE_FIELDS

ITEM_FIELDS = tuple(ENQUEUE_FIELDS)
"""What one enqueue takes: the document's ``EnqueueRequest``, field for field."""
OPTION_FIELDS = tuple(field for field in ITEM_FIELDS if field not in ("name", "args", "kwargs"))
VIEW_JOB = "django_leasejobs.view_job"
DEDUPLICATED_HEADER = "LeaseJobs-Deduplicated"


def allowed(name: str) -> bool:
    """Whether ``name`` may be enqueued over HTTP: ``@job(api=True)`` or listed in
    ``LEASEJOBS_API_JOBS``, under its name or a former one (an alias resolves to the job)."""
    spec = registry.lookup(name)
    return spec is not None and (
        spec.api or name in settings.API_JOBS or spec.name in settings.API_JOBS
    )


def _check(field: str, check: Any, *values: Any) -> Any:
    try:
        return check(*values)
    except JobValidationError as exc:
        raise ApiError("invalid", str(exc), field) from None


def parse_item(
    value: Any, where: str = ""
) -> tuple[str, list[Any], dict[str, Any], dict[str, Any]]:
    """One enqueue's name, arguments and options, each field checked as an enqueue checks it.

    The checks run field by field so the error can name its field; the enqueue then runs the
    same checks again on the whole (they are cheap), which keeps it the one authority.
    """
    prefix = f"{where}." if where else ""
    item = inputs.json_object(value, ITEM_FIELDS, where)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ApiError("invalid", "name must be a registered job's name.", f"{prefix}name")
    if not allowed(name):
        raise ApiError(
            "unknown_job", f"No job {name!r} may be enqueued through this API.", f"{prefix}name"
        )
    args, kwargs = item.get("args", []), item.get("kwargs", {})
    try:
        json_values.check_payload(args, kwargs)
    except JobValidationError as exc:
        field = "kwargs" if str(exc).startswith("kwargs") else "args"
        raise ApiError("invalid", str(exc), prefix + field) from None
    options = {key: item[key] for key in OPTION_FIELDS if item.get(key) is not None}
    for key, check in (
        ("priority", validation.check_priority),
        ("queue", validation.check_queue),
        ("max_attempts", validation.check_max_attempts),
        ("max_attempts", inputs.max_attempts),  # then the API's own cap
        ("dedupe_key", validation.check_dedupe_key),
        ("fair_key", fairness.check_key),
        ("fair_weight", fairness.check_weight),
    ):
        if key in options:
            _check(prefix + key, check, options[key])
    if "run_at" in options:
        options["run_at"] = inputs.datetime_value(options["run_at"], prefix + "run_at")
    field = prefix + ("delay" if "delay" in options else "run_at")
    _check(field, validation.check_run_at, options.get("run_at"), options.get("delay"))
    try:
        registry.get(name).check_arguments(args, kwargs)
    except JobArgumentsError as exc:  # what the handler could not be called with
        raise ApiError("invalid", str(exc), prefix + exc.field) from None
    return name, args, kwargs, options


def enqueue(request: HttpRequest) -> JsonResponse:
    """201 with the new job, or 200 with the live job already holding the dedupe key."""
    name, args, kwargs, options = parse_item(inputs.body(request))
    try:
        job, created = protocol.enqueue_inserted(name, args, kwargs, **options)
    except JobValidationError as exc:
        raise ApiError("invalid", str(exc)) from None
    if created:
        inprocess.enqueued(job)
        audit(request, job, "Enqueued", ADDITION)
    else:
        _may_see_holder(request, job, "dedupe_key")
    response = JsonResponse(serialize.job(job, job._state.db), status=201 if created else 200)
    response[DEDUPLICATED_HEADER] = "false" if created else "true"
    return response


def enqueue_many(request: HttpRequest) -> JsonResponse:
    """Every item or none, in one transaction; the jobs in the order given."""
    document = inputs.json_object(inputs.body(request), ("jobs",))
    items = document.get("jobs")
    if not isinstance(items, list) or not items:
        raise ApiError("invalid", "jobs must be a non-empty list of jobs to enqueue.", "jobs")
    most = settings.API_MAX_BATCH
    if len(items) > most:
        raise ApiError(
            "batch_too_large",
            f"{len(items)} jobs in one request; at most {most} (LEASEJOBS_API_MAX_BATCH).",
            "jobs",
        )
    parsed = [parse_item(item, f"jobs[{index}]") for index, item in enumerate(items)]
    results: list[tuple[Job, bool]] = []
    try:
        # One transaction is in one database: the batch's, by its queues (refused when they
        # route to two), so that "every item or none" holds in a shard too.
        using = routes.one_database("this batch", [(p[0], p[3].get("queue"), "") for p in parsed])
        with using_database(using), transaction.atomic(using=using):
            # Runs of one name without a dedupe key go in bulk, as enqueue_many does in Python;
            # keyed ones (by the call or by the @job) one by one, to tell a hit from a new job.
            for (name, bulk), run in groupby(parsed, key=lambda p: (p[0], not _keyed(p[0], p[3]))):
                group = list(run)
                if bulk:
                    rows = [{"args": a, "kwargs": k, **o} for _, a, k, o in group]
                    results += [(job, True) for job in protocol.enqueue_many(name, rows)]
                else:
                    for n, a, k, o in group:
                        job, new = protocol.enqueue_inserted(n, a, k, **o)
                        results.append((job, new))
            for index, (job, new) in enumerate(results):
                if not new:  # raised inside the transaction: nothing of the batch is kept
                    _may_see_holder(request, job, f"jobs[{index}].dedupe_key")
    except JobValidationError as exc:
        raise ApiError("invalid", str(exc), "jobs") from None
    created = [job for job, new in results if new]
    inprocess.enqueued(created)
    for job in created:
        audit(request, job, "Enqueued", ADDITION)
    body = {
        "jobs": [
            {"job": serialize.job(job, using), "deduplicated": not new} for job, new in results
        ]
    }
    return JsonResponse(body, status=201 if created else 200)


def _keyed(name: str, options: dict[str, Any]) -> bool:
    spec = registry.lookup(name)
    return "dedupe_key" in options or (spec is not None and spec.dedupe_key is not None)


def _may_see_holder(request: HttpRequest, holder: Job, field: str) -> None:
    """A dedupe hit shows the job holding the key only to a caller who may view jobs."""
    if not request.api_user.has_perm(VIEW_JOB):  # type: ignore[attr-defined]
        raise ApiError(
            "duplicate",
            f"A job of this name already holds dedupe key {holder.dedupe_key!r}; nothing was "
            "enqueued (seeing that job needs the view_job permission).",
            field,
        )


def list_jobs(request: HttpRequest) -> JsonResponse:
    params = inputs.query(request, ("status", "queue", "name", "limit", "cursor"))
    rows = Job.objects.using(read_database()).order_by("-id")  # a replica's, if set
    status = inputs.choice(params, "status", Status.values)
    if status is not None:
        rows = rows.filter(status=status)
    queue = inputs.name_filter(params, "queue")
    if queue is not None:
        rows = rows.filter(queue=queue)
    name = inputs.name_filter(params, "name")
    if name is not None:  # a renamed job's rows under its former names (aliases) too
        rows = rows.filter(name__in=registry.names_of(name))
    return page(params, rows, serialize.job)


def page(params: Any, rows: Any, shape: Any) -> JsonResponse:
    """A keyset page, newest first: ``results`` and the ``next_cursor`` (null on the last)."""
    size, before = inputs.limit(params), inputs.cursor(params)
    if before is not None:
        rows = rows.filter(pk__lt=before)
    found = list(rows[: size + 1])
    more = len(found) > size
    found = found[:size]
    next_cursor = inputs.encode_cursor(found[-1].pk) if more else None
    return JsonResponse({"results": [shape(row) for row in found], "next_cursor": next_cursor})


def get_row(model: Any, pk: int, what: str) -> Any:
    row = (
        model.objects.using(protocol.job_database()).filter(pk=pk).first()
        if pk <= inputs.MAX_ID
        else None
    )
    if row is None:
        raise ApiError("not_found", f"There is no {what} #{pk}.")
    return row


def get_job(request: HttpRequest, job_id: int) -> JsonResponse:
    return JsonResponse(serialize.job(get_row(Job, job_id, "job")))


def get_logs(request: HttpRequest, job_id: int) -> JsonResponse:
    """What the job's attempts logged (``Job.logs()``), oldest first."""
    return JsonResponse({"logs": get_row(Job, job_id, "job").logs()})


def _operator_action(
    request: HttpRequest, job_id: int, call: Any, states: tuple[str, ...], done: str
) -> JsonResponse:
    job = get_row(Job, job_id, "job")
    if not call(job.pk):
        job.refresh_from_db(fields=["status"])
        raise ApiError(
            "invalid_state",
            f"Job #{job.pk} is {job.status}: only {' or '.join(states)} jobs can be "
            f"{done.lower()}.",
        )
    job.refresh_from_db()
    audit(request, job, done)
    return JsonResponse(serialize.job(job))


def cancel(request: HttpRequest, job_id: int) -> JsonResponse:
    """As the admin's Cancel: a pending job, or a failed one waiting for its retry, is
    cancelled; a running job's worker is asked to end it (the job comes back still running)."""
    job = get_row(Job, job_id, "job")
    outcome = protocol.request_cancel(job.pk)
    if outcome is protocol.Cancel.REFUSED:
        job.refresh_from_db(fields=["status"])
        allowed = " or ".join((*CLAIMABLE, Status.RUNNING))
        raise ApiError(
            "invalid_state", f"Job #{job.pk} is {job.status}: only {allowed} jobs can be cancelled."
        )
    job.refresh_from_db()
    done = "Cancelled" if outcome is protocol.Cancel.CANCELLED else "Cancel requested"
    audit(request, job, done)
    return JsonResponse(serialize.job(job))


def retry(request: HttpRequest, job_id: int) -> JsonResponse:
    """As the admin's Retry now: a failed job becomes due at once (budget unchanged)."""
    return _operator_action(request, job_id, protocol.retry_now, (Status.FAILED,), "Retried now")
