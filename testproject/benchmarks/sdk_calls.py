"""The SDK's own calls for one attempt, in a loop: the observability section's floor.

What the library asks of the OpenTelemetry SDK per attempt, with nothing of the library around
it: one CONSUMER span started, made current, given the attempt's attributes when it records,
and ended, and one record of ``messaging.process.duration``, with the section's SDK set-up (a
batch processor to an in-memory exporter, an in-memory metric reader). With the API alone
(``api``), what an attempt asks of it where no SDK is set: whether a tracer provider is set,
and one record on the API's proxy histogram. Run as ``python sdk_calls.py RATIO`` or
``python sdk_calls.py api``; prints the best of five loops, in microseconds an attempt. The
section sets it beside the CPU an attempt gained in the drains.
"""

from __future__ import annotations

import sys
import timeit

from opentelemetry import context, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

ATTRIBUTES: dict[str, str] = {
    "messaging.system": "django_leasejobs",
    "messaging.destination.name": "default",
    "leasejobs.job.name": "testapp.jobs.noop",
    "messaging.operation.name": "process",
    "leasejobs.outcome": "succeeded",
}
SPAN_ATTRIBUTES: dict[str, str | int] = {
    "messaging.message.id": "1",
    "leasejobs.job.attempt": 1,
    "leasejobs.job.max_attempts": 3,
    "leasejobs.job.priority": 0,
}


def per_attempt_us(ratio: float, loops: int = 20_000) -> float:
    tracer_provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    tracer = tracer_provider.get_tracer("django_leasejobs")
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    duration = meter_provider.get_meter("django_leasejobs").create_histogram("duration")

    def attempt() -> None:
        span = tracer.start_span(
            "process default", context=context.Context(), kind=trace.SpanKind.CONSUMER
        )
        token = context.attach(trace.set_span_in_context(span))
        if span.is_recording():
            span.set_attributes(ATTRIBUTES)
            span.set_attributes(SPAN_ATTRIBUTES)
            span.set_status(trace.Status(trace.StatusCode.OK))
        context.detach(token)
        span.end()
        duration.record(0.0001, ATTRIBUTES)

    best = min(timeit.repeat(attempt, number=loops, repeat=5))
    tracer_provider.shutdown()
    meter_provider.shutdown()
    return best / loops * 1e6


def api_per_attempt_us(loops: int = 20_000) -> float:
    from opentelemetry import metrics

    duration = metrics.get_meter("django_leasejobs").create_histogram("duration")

    def attempt() -> None:
        trace.get_tracer_provider()
        duration.record(0.0001, ATTRIBUTES)

    return min(timeit.repeat(attempt, number=loops, repeat=5)) / loops * 1e6


if __name__ == "__main__":
    if sys.argv[1] == "api":
        print(f"{api_per_attempt_us():.2f}")
    else:
        print(f"{per_attempt_us(float(sys.argv[1])):.2f}")
