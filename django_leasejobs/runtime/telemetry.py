"""Around one attempt: its logs captured, its span current, and how it ended recorded.

The sync (:mod:`.execution`) and the async (:mod:`.async_execution`) paths run their handler
inside :func:`observed`, so both give an attempt the same span, metrics and logs: the span is
current and the logs are captured in the handler's own thread or task (its own spans nest
under the span, its records reach its buffer).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..core import otel_metrics, tracing
from . import job_logs

if TYPE_CHECKING:
    from .execution import Execution


@contextlib.contextmanager
def observed(execution: Execution) -> Iterator[None]:
    """The attempt's logs and span around its handler; its end recorded when it returns."""
    started = time.monotonic()
    spanned = tracing.processing(execution.job) if tracing.enabled() else NO_SPAN
    with job_logs.capturing(execution), spanned as span:
        try:
            yield
        finally:
            ended(span, execution, time.monotonic() - started)


NO_SPAN = contextlib.nullcontext()
"""Where no span records: the attempt runs with no span made at all."""


def ended(span: Any, execution: Execution, seconds: float) -> None:
    """Record how the attempt ended: on its span, and in the metrics."""
    traced(span, execution)
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


def traced(span: Any, execution: Execution) -> None:
    """Say on the attempt's span how it ended (``tracing.processed``): a snooze and a
    deferral (a name this worker cannot run) are not errors; a cancelled async handler, with
    no exception of its own, is one of its failure's kind."""
    if span is None:
        return
    failure, context = execution.failure, execution.context
    ending: dict[str, Any] = {
        "lease_lost": context.lease_lost,
        "cancelled": context.cancel_reason if context.cancelled else None,
    }
    if execution.snoozed:
        ending["snooze_after"] = execution.when
    elif failure is not None and not execution.unknown:
        ending["exception"] = execution.exception
        ending["error_type"] = "" if execution.exception is not None else failure.kind
        ending["retry_after"] = execution.when
    tracing.processed(span, **ending)
