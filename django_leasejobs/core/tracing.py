"""OpenTelemetry spans around each enqueue and each attempt, when ``opentelemetry-api`` is there.

The ``otel`` extra installs the API alone; the project brings its own SDK and exporter. Without
the API nothing is imported and every function here returns at once. With the API and no SDK
no span is made at all (``enabled``), and with an SDK that does not sample a span, attributes
are set only on spans that record (``is_recording``) and no trace context is stored on the row.
The library never sets a tracer provider: it asks for the global one, the project's.

A send span's W3C context (``traceparent``, ``tracestate``) is stored on the job row
(``Job.trace_context``), so every attempt, after retries, snoozes, deferrals and a replay, finds
the enqueue it came from; ``LEASEJOBS_OTEL_SPAN_RELATIONSHIP`` says how its process span relates
to it (docs/observability.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any

from .conf import settings

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
except ImportError:  # the otel extra is not installed: no spans, nothing imported
    trace = None  # type: ignore[assignment]

SYSTEM = "django_leasejobs"
"""``messaging.system``: the semantic conventions' name for this queue system."""

_tracer: Any = None


def enabled() -> bool:
    """Whether spans can record: the API is installed and the project set an SDK's provider.

    The API's own providers (none set, or the no-op one) record nothing; callers skip the
    span altogether then, sparing each enqueue and attempt the making of a no-op span. The
    API lets the global provider be set once, so a yes is kept (the check costs an ABC
    ``isinstance`` otherwise, on every attempt).
    """
    global _enabled
    if _enabled:
        return True
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    _enabled = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    return _enabled


_enabled = False


def _get_tracer() -> Any:
    """The library's tracer, from the global provider (a proxy until the project sets one)."""
    global _tracer
    if _tracer is None:
        _tracer = trace.get_tracer("django_leasejobs", library_version())
    return _tracer


def library_version() -> str | None:
    """The installed distribution's version, for the instrumentation scope."""
    try:
        return metadata.version("django-leasejobs")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return None


def _messaging(operation: str, queue: str, name: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": queue,
        "leasejobs.job.name": name,
    }


class Send:
    """The span of one enqueue call, and the context its jobs store."""

    __slots__ = ("carrier", "span")

    def __init__(self, span: Any = None, carrier: dict[str, str] | None = None) -> None:
        self.span = span
        self.carrier = carrier
        """``traceparent`` (and ``tracestate``) of the send span; None when nothing records."""

    def sent(self, job_id: Any) -> None:
        """Name the job the span sent (``messaging.message.id``), once its row has an id."""
        if self.span is not None and self.span.is_recording():
            self.span.set_attribute("messaging.message.id", str(job_id))


_NOT_SENT = Send()


@contextmanager
def sending(queue: str, name: str, count: int | None = None) -> Iterator[Send]:
    """A PRODUCER span ``send <queue>`` around an enqueue, child of the caller's current span.

    ``count``: an ``enqueue_many`` call, one span for all its jobs
    (``messaging.batch.message_count``); each job stores this span's context.
    """
    if not enabled():
        yield _NOT_SENT
        return
    with _get_tracer().start_as_current_span(f"send {queue}", kind=trace.SpanKind.PRODUCER) as span:
        if not span.is_recording():
            yield _NOT_SENT
            return
        span.set_attributes(_messaging("send", queue, name))
        if count is not None:
            span.set_attribute("messaging.batch.message_count", count)
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        yield Send(span, carrier or None)


class processing:
    """A CONSUMER span ``process <queue>`` for one attempt, current while the handler runs.

    Its relation to the job's send span: ``"link"`` starts a new trace linked to it (a job may
    run hours after its enqueue), ``"child"`` continues that trace, ``"none"`` starts a new
    trace with no link. A row without a stored context (a cron occurrence, a job enqueued with
    no SDK) starts its own trace. Entering yields the span (None without the API) for
    ``processed``. What ``start_as_current_span`` does, without its three generator-based
    context managers: this runs once per attempt, sampled or not.
    """

    __slots__ = ("_job", "_span", "_token")

    def __init__(self, job: Any) -> None:
        self._job = job
        self._span: Any = None
        self._token: Any = None

    def __enter__(self) -> Any:
        if not enabled():  # pragma: no cover: telemetry.span asks first
            return None
        job = self._job
        relationship = settings.OTEL_SPAN_RELATIONSHIP
        parent = otel_context.Context()  # a new trace, whatever is current in this thread
        links: list[Any] = []
        if job.trace_context and relationship != "none":
            sent = propagate.extract(job.trace_context, context=otel_context.Context())
            if relationship == "child":
                parent = sent
            else:
                links.extend(_links([job.trace_context]))
        span = self._span = _get_tracer().start_span(
            f"process {job.queue}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            links=links or None,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._token = otel_context.attach(trace.set_span_in_context(span))
        if span.is_recording():
            span.set_attributes(_messaging("process", job.queue, job.name))
            span.set_attributes(
                {
                    "messaging.message.id": str(job.pk),
                    "leasejobs.job.attempt": job.attempt,
                    "leasejobs.job.max_attempts": job.max_attempts,
                    "leasejobs.job.priority": job.priority,
                }
            )
        return span

    def __exit__(self, *exc_info: object) -> None:
        if self._span is not None:
            otel_context.detach(self._token)
            self._span.end()


def _links(carriers: list[dict[str, str]], attributes: Any = None) -> list[Any]:
    """Links to the spans whose W3C contexts ``carriers`` hold (the invalid ones left out)."""
    links = []
    for carrier in carriers:
        extracted = propagate.extract(carrier, context=otel_context.Context())
        span_context = trace.get_current_span(extracted).get_span_context()
        if span_context.is_valid:
            links.append(trace.Link(span_context, attributes))
    return links


def link_parents(span: Any, parents: list[dict[str, str]]) -> None:
    """Link a workflow step's recording span to its parents' process spans (their W3C
    contexts), unless ``LEASEJOBS_OTEL_SPAN_RELATIONSHIP`` is ``"none"``. Added once the span
    records, so an unsampled attempt reads nothing for them; an API older than 1.23 has no
    ``add_link`` and makes none."""
    add_link = getattr(span, "add_link", None)
    if add_link is None or settings.OTEL_SPAN_RELATIONSHIP == "none":
        return
    for link in _links(parents, {"leasejobs.link": "workflow.parent"}):
        add_link(link.context, link.attributes)


def carrier_of(span: Any) -> dict[str, str]:
    """The span's W3C context (``traceparent``, ``tracestate``), to keep on a row."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def _when(value: float | dt.datetime) -> float | str:
    """A ``Retry``'s or ``Snooze``'s time as an attribute: seconds, or an ISO 8601 moment."""
    return value.isoformat() if isinstance(value, dt.datetime) else float(value)


def processed(
    span: Any,
    *,
    exception: BaseException | None = None,
    error_type: str = "",
    retry_after: float | dt.datetime | None = None,
    snooze_after: float | dt.datetime | None = None,
    lease_lost: bool = False,
    cancelled: str | None = None,
) -> None:
    """Record how the attempt ended on its span, before the span ends.

    An error (``exception``, or an ``error_type`` with no exception of the handler's, as a
    timeout) sets the span's status to ERROR; a ``Retry`` is one too, and says when
    (``leasejobs.retry.after``); a ``Snooze`` is not an error (``leasejobs.snooze.after``).
    A lost lease and a cancel are events: the attempt's result is not written.
    """
    if span is None or not span.is_recording():
        return
    if snooze_after is not None:
        span.set_attribute("leasejobs.snooze.after", _when(snooze_after))
    elif exception is not None or error_type:
        kind = error_type or qualified_type(exception)
        span.set_attribute("error.type", kind)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exception or kind)))
        if retry_after is not None:
            span.set_attribute("leasejobs.retry.after", _when(retry_after))
        if exception is not None:
            span.record_exception(exception)
    if lease_lost:
        span.add_event("leasejobs.lease_lost")
    if cancelled is not None:
        span.add_event("leasejobs.cancelled", {"leasejobs.cancel.reason": cancelled})


def progressed(span: Any, done: float, total: float | None, message: str) -> None:
    """A progress update (``ctx.progress``) as an event of the attempt's span."""
    attributes: dict[str, Any] = {"leasejobs.progress.done": done}
    if total is not None:
        attributes["leasejobs.progress.total"] = total
    if message:
        attributes["leasejobs.progress.message"] = message
    span.add_event("leasejobs.progress", attributes)


def qualified_type(exception: BaseException | None) -> str:
    """``error.type``: the exception's class, by its full path unless it is a builtin."""
    cls = type(exception)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
