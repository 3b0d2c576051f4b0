"""An attempt's telemetry: its ``process`` span, how it ended, its metrics and lost leases.

Kept out of :mod:`.execution` so that running a job reads as running a job: the sync and the
async execution open the span with :func:`span`, hand it to the attempt's context with
:func:`began` (its progress reports become the span's events) and close with :func:`ended`.
Every OpenTelemetry call is in ``core/tracing.py`` and ``core/otel_metrics.py``; without
``opentelemetry-api`` these functions do next to nothing, and with the API and no SDK no span
is made (``NO_SPAN``) and nothing is allocated per attempt.

A workflow step's span links to its parents' process spans: each step's job keeps its span's
context (:func:`kept`, before its end is written) and a child reads its parents'
(:func:`link_parents`), one query each, only while its span records.

A lost lease is counted (``leasejobs.lease.lost``) where the worker learns of it: a heartbeat
that renewed no row for the job (:mod:`.heartbeat`), or a guarded write that changed none: the
handler's ``ctx.complete()`` (before the span ends: an event ``leasejobs.lease_lost`` on it
too), or the result's write after the handler returned (:func:`refused`; the span has ended
by then, so the counter and the ``job.stale`` log line say it).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import Error as DatabaseError

from .. import protocol
from ..core import otel_metrics, tracing
from ..db import signals
from ..errors import StaleAttemptError
from ..protocol import Outcome

if TYPE_CHECKING:
    from ..models import Job
    from .execution import Execution

logger = logging.getLogger("django_leasejobs")

NO_SPAN = contextlib.nullcontext()
"""Where no span records: the attempt runs with no span made at all."""


def span(job: Job) -> Any:
    """The attempt's span, as a context manager yielding it (None where nothing records)."""
    return tracing.processing(job) if tracing.enabled() else NO_SPAN


def began(span: Any, execution: Execution) -> None:
    """Give the attempt's context its span, when it records, for the progress events."""
    if span is not None and span.is_recording():
        execution.context.span = span


def step_to_link(execution: Execution) -> int | None:
    """The workflow step of an attempt whose span records (None: nothing to link or keep)."""
    return execution.job.workflow_step_id if execution.context.span is not None else None


def link_parents(execution: Execution) -> None:
    """Link a step's span to its parents' process spans, as their jobs kept them (one query;
    a database error costs the links, never the attempt)."""
    step_id = step_to_link(execution)
    if step_id is None:
        return
    try:
        parents = protocol.parent_process_spans(step_id)
    except DatabaseError as exc:
        logger.debug("job.trace_links_error id=%s error=%s", execution.job.pk, exc)
        return
    tracing.link_parents(execution.context.span, parents)


async def alink_parents(execution: Execution) -> None:
    """:func:`link_parents` for an async handler (a step whose span records, as
    :func:`step_to_link` says): its query off the event loop."""
    await sync_to_async(link_parents, thread_sensitive=True)(execution)


def kept(execution: Execution) -> None:
    """Keep a step's span context on its job for its children (fenced by the attempt),
    before the attempt's end is written."""
    if step_to_link(execution) is None:
        return
    job, span = execution.job, execution.context.span
    try:
        protocol.record_process_span(job.pk, job.attempt, tracing.carrier_of(span))
    except DatabaseError as exc:  # the children go unlinked; the attempt's end is written
        logger.debug("job.trace_keep_error id=%s error=%s", job.pk, exc)


def ended(span: Any, execution: Execution, seconds: float) -> None:
    """Record how the attempt ended: on its span, and in the metrics."""
    context = execution.context
    refused = isinstance(execution.exception, StaleAttemptError) and not context.lease_lost
    if refused:  # ``ctx.complete()`` found the token stale: the lease was lost
        lost(execution.job, otel_metrics.WRITE)
    if span is not None:
        context.end_progress()  # the last report an event too, before the span ends
        traced(span, execution, lease_lost=refused)
    failure = execution.failure
    if execution.ok:
        outcome, error_type = otel_metrics.SUCCEEDED, ""
    elif execution.snoozed:
        outcome, error_type = otel_metrics.SNOOZED, ""
    elif execution.unknown:
        outcome, error_type = otel_metrics.DEFERRED, ""
    elif execution.exception is not None:
        outcome, error_type = otel_metrics.FAILED, tracing.qualified_type(execution.exception)
    else:  # ended with no exception of the handler's: a cancelled async handler, an upgrade
        outcome = otel_metrics.FAILED
        error_type = failure.kind if failure is not None else ""
    job = execution.job
    otel_metrics.consumed(job.queue, job.name, outcome, seconds, error_type)
    if signals.wanted(signals.job_processed):
        signals.send_now(
            signals.job_processed,
            job_id=job.pk,
            name=job.name,
            queue=job.queue,
            attempt=job.attempt,
            outcome=outcome,
            seconds=seconds,
            error_type=error_type,
        )


def claimed(worker_id: str, queues: str, size: int, seconds: float) -> None:
    """A claim of the worker's took ``size`` jobs in ``seconds``: its metrics and signal."""
    otel_metrics.claimed(seconds, size, queues)
    if signals.wanted(signals.jobs_claimed):
        signals.send_now(
            signals.jobs_claimed, worker_id=worker_id, queues=queues, size=size, seconds=seconds
        )


def lost(job: Job, detected_by: str) -> None:
    """The worker learnt it lost the job's lease (``otel_metrics.HEARTBEAT`` or ``WRITE``)."""
    otel_metrics.lease_lost(job.queue, job.name, detected_by)
    if signals.wanted(signals.lease_lost):
        signals.send_now(
            signals.lease_lost,
            job_id=job.pk,
            name=job.name,
            queue=job.queue,
            attempt=job.attempt,
            detected_by=detected_by,
        )


def traced(span: Any, execution: Execution, *, lease_lost: bool = False) -> None:
    """Say on the attempt's span how it ended (``tracing.processed``): a snooze and a
    deferral (a name this worker cannot run) are not errors; a cancelled async handler, with
    no exception of its own, is one of its failure's kind."""
    failure, context = execution.failure, execution.context
    ending: dict[str, Any] = {
        "lease_lost": context.lease_lost or lease_lost,
        "cancelled": context.cancel_reason if context.cancelled else None,
    }
    if execution.snoozed:
        ending["snooze_after"] = execution.when
    elif failure is not None and not execution.unknown:
        ending["exception"] = execution.exception
        ending["error_type"] = "" if execution.exception is not None else failure.kind
        ending["retry_after"] = execution.when
    tracing.processed(span, **ending)


def refused(execution: Execution, outcome: Outcome) -> None:
    """Count a lost lease when the write of the attempt's result was refused as stale.

    Not when nothing was written for it (the heartbeat had found the lease lost, which it
    counted; the worker had ended the attempt) nor when ``ctx.complete()`` was refused
    already (:func:`ended` counted it).
    """
    if outcome is not Outcome.STALE:
        return
    if not (otel_metrics.available() or signals.wanted(signals.lease_lost)):
        return
    context = execution.context
    if context.lease_lost or context.cancelled or context.completed:
        return
    if isinstance(execution.exception, StaleAttemptError):
        return
    lost(execution.job, otel_metrics.WRITE)
