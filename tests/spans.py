"""OpenTelemetry's SDK for the tests: one tracer provider for the whole session, recording
only while a test holds the ``spans`` fixture (tests/conftest.py).

OpenTelemetry lets a process set its global tracer provider once, so the provider is set the
first time a test asks for spans and kept; between such tests its sampler drops every span, so
the rest of the suite runs as a project with an SDK that samples nothing (no span recorded,
no trace context stored on a row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult


class Switch(Sampler):
    """Records every span while ``on``, none otherwise."""

    def __init__(self) -> None:
        self.on = False

    def should_sample(
        self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        return SamplingResult(
            Decision.RECORD_AND_SAMPLE if self.on else Decision.DROP,
            trace_state=parent.trace_state if parent.is_valid else None,
        )

    def get_description(self) -> str:
        return "Switch"


class Recorded:
    """The session's exporter, with the lookups the tests make."""

    def __init__(self) -> None:
        self.sampler = Switch()
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(sampler=self.sampler)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def clear(self) -> None:
        self.exporter.clear()


_recorded: Recorded | None = None


def recorded() -> Recorded:
    """The session's provider, set as the global one on first use."""
    global _recorded
    if _recorded is None:
        _recorded = Recorded()
        trace.set_tracer_provider(_recorded.provider)
    return _recorded


class Measured:
    """The session's metric reader, reporting what was recorded since the last read (delta)."""

    def __init__(self) -> None:
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider, ObservableCounter
        from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

        delta = AggregationTemporality.DELTA
        self.reader = InMemoryMetricReader(
            preferred_temporality={Counter: delta, ObservableCounter: delta, Histogram: delta}
        )
        metrics.set_meter_provider(MeterProvider(metric_readers=[self.reader]))

    def read(self) -> dict[str, list[Any]]:
        """Each instrument's points since the last read, by instrument name."""
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


_measured: Measured | None = None


def measured() -> Measured:
    """The session's meter provider, set as the global one on first use."""
    global _measured
    if _measured is None:
        _measured = Measured()
    return _measured
