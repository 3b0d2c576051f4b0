"""The observability section's worker processes: OpenTelemetry as ``BENCHMARK_OTEL`` says.

Imported by benchmarks/settings.py, so before any app: ``absent`` makes ``import opentelemetry``
fail in this process (as if the ``otel`` extra were not installed), ``sdk10`` and ``sdk100`` set
the SDK's tracer provider (10% or 100% of traces sampled, a batch processor to an in-memory
exporter) and meter provider (an in-memory reader). ``api`` changes nothing.
"""

from __future__ import annotations

import sys

RATIOS = {"sdk10": 0.1, "sdk100": 1.0}


def configure(variant: str) -> None:
    if variant == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
        return
    if variant == "api":
        return
    if variant not in RATIOS:
        raise ValueError(f"BENCHMARK_OTEL: {variant!r} is not one of absent, api, sdk10, sdk100")
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(RATIOS[variant])))
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
