"""Jobs whose handlers open spans of their own: the tracing tests check they nest under the
attempt's ``process`` span (tests/core/test_tracing.py)."""

from __future__ import annotations

import asyncio

from opentelemetry import trace

from django_leasejobs import job

tracer = trace.get_tracer("testapp")


@job
def traced(label: str) -> str:
    with tracer.start_as_current_span(f"inside {label}"):
        return label


@job
async def async_traced(label: str) -> str:
    await asyncio.sleep(0)
    with tracer.start_as_current_span(f"inside {label}"):
        await asyncio.sleep(0)
        return label


@job(max_attempts=1)
def broken() -> None:
    raise ValueError("the partner API said no")
