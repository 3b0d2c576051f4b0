"""OpenTelemetry metrics of enqueues and attempts, through the API, beside the spans.

The counterpart of :mod:`.tracing` for numbers: ``messaging.client.sent.messages`` (jobs
enqueued), ``messaging.client.consumed.messages`` (attempts run, by outcome) and
``messaging.process.duration`` (seconds a handler ran, by job name and outcome), with the
messaging conventions' attributes. The instruments come from the global meter provider, the
project's; until it sets one they are the API's proxies, which record nothing. Without
``opentelemetry-api`` nothing is imported and every function returns at once.
"""

from __future__ import annotations

from typing import Any

from . import tracing
from .tracing import SYSTEM

try:
    from opentelemetry import metrics
except ImportError:  # the otel extra is not installed
    metrics = None  # type: ignore[assignment]

SUCCEEDED = "succeeded"
FAILED = "failed"
SNOOZED = "snoozed"
DEFERRED = "deferred"
"""``leasejobs.outcome`` of an attempt: what its handler did (the write that follows may still
be refused, as for a lost lease)."""


class _Instruments:
    """Made once, on first use: the API's proxies bind to the project's provider when it is
    set, whenever that is."""

    def __init__(self) -> None:
        meter = metrics.get_meter("django_leasejobs", tracing.library_version() or "")
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Jobs enqueued."
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Attempts run, by outcome.",
        )
        self.duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="How long a job's handler ran, by job name and outcome.",
        )


_instruments: _Instruments | None = None


def _get() -> _Instruments | None:
    global _instruments
    if metrics is None:
        return None
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


def sent(queue: str, name: str, count: int = 1) -> None:
    """``count`` jobs of ``name`` enqueued on ``queue``."""
    instruments = _get()
    if instruments is not None:
        instruments.sent.add(
            count,
            {
                "messaging.system": SYSTEM,
                "messaging.operation.name": "send",
                "messaging.destination.name": queue,
                "leasejobs.job.name": name,
            },
        )


def consumed(queue: str, name: str, outcome: str, seconds: float, error_type: str = "") -> None:
    """One attempt of ``name`` ran for ``seconds`` and ended with ``outcome``."""
    instruments = _get()
    if instruments is None:
        return
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "process",
        "messaging.destination.name": queue,
        "leasejobs.job.name": name,
        "leasejobs.outcome": outcome,
    }
    if error_type:
        attributes["error.type"] = error_type
    instruments.consumed.add(1, attributes)
    instruments.duration.record(seconds, attributes)
