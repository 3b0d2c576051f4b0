"""OpenTelemetry metrics of enqueues and attempts, through the API, beside the spans.

The counterpart of :mod:`.tracing` for numbers: ``messaging.client.sent.messages`` (jobs
enqueued), ``messaging.client.consumed.messages`` (attempts run, by outcome) and
``messaging.process.duration`` (seconds a handler ran, by job name and outcome), with the
messaging conventions' attributes; the worker's claims (``leasejobs.claim.duration``,
``leasejobs.claim.size``), the leases it learnt it lost (``leasejobs.lease.lost``), the jobs
dead-lettered (``leasejobs.dead_letters``), and two observable gauges read at collection time,
``leasejobs.queue.depth`` and ``leasejobs.queue.oldest_due_age``, for which the reading is
given by a layer that may query (:func:`observe_queues`).

The instruments are made once per process, on first use, from the global meter provider, the
project's; until it sets one they are the API's proxies, which record nothing. Without
``opentelemetry-api`` nothing is imported and every function returns at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
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
        self.meter = meter
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Jobs enqueued."
        )
        self.consumed = _Attempts()
        meter.create_observable_counter(
            "messaging.client.consumed.messages",
            callbacks=[self.consumed.observe],
            unit="{message}",
            description="Attempts run, by outcome.",
        )
        self.duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="How long a job's handler ran, by job name and outcome.",
        )
        self.claim_duration = meter.create_histogram(
            "leasejobs.claim.duration", unit="s", description="How long a worker's claim took."
        )
        self.claim_size = meter.create_histogram(
            "leasejobs.claim.size", unit="{job}", description="Jobs a worker's claim took."
        )
        self.lease_lost = meter.create_counter(
            "leasejobs.lease.lost",
            unit="{lease}",
            description="Leases a worker learnt it lost: at a heartbeat, or by a refused write.",
        )
        self.dead_letters = meter.create_counter(
            "leasejobs.dead_letters", unit="{job}", description="Jobs dead-lettered."
        )


_instruments: _Instruments | None = None


def _get() -> _Instruments | None:
    global _instruments
    if metrics is None:
        return None
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


def _job(queue: str, name: str, **more: str) -> dict[str, Any]:
    """The attributes of a job's measurement: the system, its queue and name, and ``more``."""
    return {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "leasejobs.job.name": name,
        **more,
    }


def sent(queue: str, name: str, count: int = 1) -> None:
    """``count`` jobs of ``name`` enqueued on ``queue``."""
    instruments = _get()
    if instruments is not None:
        instruments.sent.add(count, _job(queue, name, **{"messaging.operation.name": "send"}))


AttemptKey = tuple[str, str, str, str]
"""An attempt's ``(queue, name, outcome, error type)``: one set of its measurements' attributes."""


class _Attempts:
    """Attempts run in this process, counted by attribute set and reported when the project's
    reader collects: ``messaging.client.consumed.messages`` is an observable counter (a
    monotonic sum, as a counter's points are), since the SDK's ``Counter.add`` costs more than
    a no-op job's whole attempt (docs/benchmarks.md, "Observability"). Each set's attributes
    are built once and shared with the duration's histogram."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[AttemptKey, int] = {}
        self._attributes: dict[AttemptKey, dict[str, Any]] = {}

    def add(self, key: AttemptKey) -> dict[str, Any]:
        """Count one attempt; its attributes (never to be changed by the caller)."""
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            attributes = self._attributes.get(key)
            if attributes is None:
                attributes = self._attributes[key] = _attempt(*key)
            return attributes

    def observe(self, options: Any) -> Iterator[Any]:
        with self._lock:
            counted = [(count, self._attributes[key]) for key, count in self._counts.items()]
        for count, attributes in counted:
            yield metrics.Observation(count, attributes)


def _attempt(queue: str, name: str, outcome: str, error_type: str) -> dict[str, Any]:
    more = {"messaging.operation.name": "process", "leasejobs.outcome": outcome}
    if error_type:
        more["error.type"] = error_type
    return _job(queue, name, **more)


def consumed(queue: str, name: str, outcome: str, seconds: float, error_type: str = "") -> None:
    """One attempt of ``name`` ran for ``seconds`` and ended with ``outcome``."""
    instruments = _get()
    if instruments is None:
        return
    attributes = instruments.consumed.add((queue, name, outcome, error_type))
    instruments.duration.record(seconds, attributes)


def available() -> bool:
    """Whether ``opentelemetry-api`` is there: a caller may skip work done only for metrics."""
    return metrics is not None


def claimed(seconds: float, size: int, queues: str) -> None:
    """A worker's claim took ``size`` jobs (0 too: an empty claim costs a query as well) in
    ``seconds``; ``queues`` is what it claimed from (``"*"``: every queue)."""
    instruments = _get()
    if instruments is None:
        return
    attributes = {"messaging.system": SYSTEM, "leasejobs.claim.queues": queues}
    instruments.claim_duration.record(seconds, attributes)
    instruments.claim_size.record(size, attributes)


HEARTBEAT = "heartbeat"
WRITE = "write"
"""``leasejobs.lease.detected_by``: a heartbeat renewed no row for the job, or the attempt's
guarded write changed no row (a refused stale write)."""


def lease_lost(queue: str, name: str, detected_by: str) -> None:
    """A worker learnt it no longer holds the lease of a job of ``name``."""
    instruments = _get()
    if instruments is not None:
        more = {"leasejobs.lease.detected_by": detected_by}
        instruments.lease_lost.add(1, _job(queue, name, **more))


def dead_lettered(queue: str, name: str) -> None:
    """A job of ``name`` became dead, its dead letter written."""
    instruments = _get()
    if instruments is not None:
        instruments.dead_letters.add(1, _job(queue, name))


QueueRow = tuple[str, float, float]
"""One queue's ``(name, due jobs, oldest due age in seconds)``."""

FRESH = 1.0
"""Seconds one reading serves: the two gauges of one collection share it."""


class _Queues:
    """The queue gauges' reading, taken once for both gauges of a collection."""

    def __init__(self, read: Callable[[], Iterable[QueueRow]]) -> None:
        self.read = read
        self._lock = threading.Lock()
        self._rows: list[QueueRow] = []
        self._taken: float | None = None

    def rows(self) -> list[QueueRow]:
        with self._lock:
            now = time.monotonic()
            if self._taken is None or now - self._taken >= FRESH:
                self._rows = list(self.read())
                self._taken = now
            return self._rows

    def depth(self, options: Any) -> Iterator[Any]:
        for queue, due, _ in self.rows():
            yield metrics.Observation(due, _queue(queue))

    def oldest_due_age(self, options: Any) -> Iterator[Any]:
        for queue, _, age in self.rows():
            yield metrics.Observation(age, _queue(queue))


def _queue(queue: str) -> dict[str, str]:
    return {"messaging.system": SYSTEM, "messaging.destination.name": queue}


_queues: _Queues | None = None
_queues_lock = threading.Lock()


def observe_queues(read: Callable[[], Iterable[QueueRow]]) -> bool:
    """Register the observable gauges ``leasejobs.queue.depth`` and
    ``leasejobs.queue.oldest_due_age``, read by ``read`` when the project's metric reader
    collects (once for both). Once per process: later calls change nothing and return False
    (as without the API)."""
    global _queues
    instruments = _get()
    if instruments is None:
        return False
    with _queues_lock:
        if _queues is not None:
            return False
        _queues = _Queues(read)
        meter = instruments.meter
        meter.create_observable_gauge(
            "leasejobs.queue.depth",
            callbacks=[_queues.depth],
            unit="{job}",
            description="Jobs due and not claimed, by queue.",
        )
        meter.create_observable_gauge(
            "leasejobs.queue.oldest_due_age",
            callbacks=[_queues.oldest_due_age],
            unit="s",
            description="Seconds since the oldest due job became due, by queue (0 when none).",
        )
        return True
