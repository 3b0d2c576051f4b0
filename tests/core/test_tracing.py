"""Spans around each enqueue and each attempt (``core/tracing.py``), recorded with
OpenTelemetry's SDK and its in-memory exporter (the ``spans`` fixture, tests/spans.py).

Sync and async handlers, a failure, a retry, a snooze, the three relationships of a process
span to its send span, a bulk enqueue, a replay, a lost lease and a cancel.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.test import override_settings
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from testapp import jobs, retry_jobs, tracing_jobs

from django_leasejobs import operations, protocol, schedules
from django_leasejobs.models import DeadLetter, Job, Schedule, Status
from django_leasejobs.runtime import execution
from django_leasejobs.runtime.context import Cancellation
from django_leasejobs.runtime.worker import Worker
from django_leasejobs.testing import drain, travel

from ..conftest import shifted

WORKER = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05, "scheduler": False}
TRACED = "testapp.tracing_jobs.traced"

pytestmark = pytest.mark.django_db


def traceparent(span: Any) -> str:
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def process_spans(spans: Any) -> list[Any]:
    return [span for span in spans.all() if span.kind == SpanKind.CONSUMER]


class TestSend:
    def test_enqueue_is_a_producer_span_under_the_callers_span(self, spans: Any) -> None:
        caller = trace.get_tracer("test")
        with caller.start_as_current_span("request") as request:
            job = tracing_jobs.traced.enqueue("a")
        send = spans.one("send default")
        assert send.kind == SpanKind.PRODUCER
        assert send.parent is not None
        assert send.parent.span_id == request.get_span_context().span_id
        assert dict(send.attributes) == {
            "messaging.system": "django_leasejobs",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": "default",
            "messaging.message.id": str(job.pk),
            "leasejobs.job.name": TRACED,
        }
        stored = Job.objects.get(pk=job.pk).trace_context
        assert stored == {"traceparent": traceparent(send)}

    def test_the_queue_names_the_span(self, spans: Any) -> None:
        jobs.other_queue.enqueue()
        assert spans.one("send other").attributes["messaging.destination.name"] == "other"

    def test_enqueue_many_is_one_span_whose_context_every_job_stores(self, spans: Any) -> None:
        made = tracing_jobs.traced.enqueue_many(
            [(["a"], {}), {"args": ["b"], "priority": 3}, (["c"], {})]
        )
        send = spans.one("send default")
        assert send.attributes["messaging.batch.message_count"] == 3
        assert "messaging.message.id" not in send.attributes
        rows = Job.objects.filter(pk__in=[job.pk for job in made])
        stored = {row.trace_context["traceparent"] for row in rows}
        assert stored == {traceparent(send)}

    def test_nothing_is_stored_when_nothing_records(self) -> None:
        job = tracing_jobs.traced.enqueue("a")
        assert Job.objects.get(pk=job.pk).trace_context is None


class TestProcess:
    def test_an_attempt_is_a_consumer_span_linked_to_its_send_span(self, spans: Any) -> None:
        job = tracing_jobs.traced.enqueue("a")
        assert drain().succeeded == 1
        send, process = spans.one("send default"), spans.one("process default")
        assert process.kind == SpanKind.CONSUMER
        assert process.parent is None
        assert process.context.trace_id != send.context.trace_id
        assert [link.context.span_id for link in process.links] == [send.context.span_id]
        assert dict(process.attributes) == {
            "messaging.system": "django_leasejobs",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": "default",
            "messaging.message.id": str(job.pk),
            "leasejobs.job.name": TRACED,
            "leasejobs.job.attempt": 1,
            "leasejobs.job.max_attempts": 5,
            "leasejobs.job.priority": 0,
        }
        assert process.status.status_code == StatusCode.UNSET
        inside = spans.one("inside a")
        assert inside.parent.span_id == process.context.span_id

    @override_settings(LEASEJOBS_OTEL_SPAN_RELATIONSHIP="child")
    def test_child_continues_the_enqueues_trace(self, spans: Any) -> None:
        tracing_jobs.traced.enqueue("a")
        drain()
        send, process = spans.one("send default"), spans.one("process default")
        assert process.context.trace_id == send.context.trace_id
        assert process.parent.span_id == send.context.span_id
        assert not process.links

    @override_settings(LEASEJOBS_OTEL_SPAN_RELATIONSHIP="none")
    def test_none_starts_a_new_trace_without_a_link(self, spans: Any) -> None:
        tracing_jobs.traced.enqueue("a")
        drain()
        send, process = spans.one("send default"), spans.one("process default")
        assert process.context.trace_id != send.context.trace_id
        assert process.parent is None
        assert not process.links

    def test_a_job_without_a_context_starts_its_own_trace(self, spans: Any) -> None:
        """A cron occurrence, or a job enqueued while nothing recorded."""
        spans.sampler.on = False
        tracing_jobs.traced.enqueue("a")
        spans.sampler.on = True
        drain()
        process = spans.one("process default")
        assert process.parent is None
        assert not process.links

    def test_a_cron_occurrence_starts_its_own_trace(self, spans: Any) -> None:
        schedule = Schedule.objects.create(
            name="tick", cron="* * * * *", job=TRACED, args=["cron"], misfire="all"
        )
        Schedule.objects.filter(pk=schedule.pk).update(last_occurrence_at=shifted(-120))
        with trace.get_tracer("test").start_as_current_span("around"):
            assert schedules.tick() >= 1  # emitted by the scheduler, not enqueued by a caller
        assert not spans.named("send default")
        assert set(Job.objects.values_list("trace_context", flat=True)) == {None}
        drain()
        for process in process_spans(spans):
            assert (process.parent, process.links) == (None, ())
        inside = spans.named("inside cron")
        assert inside
        assert {span.parent.span_id for span in inside} == {
            span.context.span_id for span in process_spans(spans)
        }

    def test_the_workers_own_current_span_is_no_parent(self, spans: Any) -> None:
        tracing_jobs.traced.enqueue("a")
        with trace.get_tracer("test").start_as_current_span("around"):
            drain()
        assert spans.one("process default").parent is None

    def test_a_failure_is_an_error_with_its_exception(self, spans: Any) -> None:
        tracing_jobs.broken.enqueue()
        assert drain().dead == 1
        process = spans.one("process default")
        assert process.status.status_code == StatusCode.ERROR
        assert process.attributes["error.type"] == "ValueError"
        (event,) = process.events
        assert event.name == "exception"
        assert event.attributes["exception.message"] == "the partner API said no"

    def test_a_retry_is_an_error_and_the_context_survives_it(self, spans: Any) -> None:
        job = retry_jobs.retry_once.enqueue(600)
        assert drain().retried == 1
        travel(600)
        assert drain().succeeded == 1
        send = spans.one("send default")
        first, second = sorted(process_spans(spans), key=lambda s: s.start_time)
        assert first.status.status_code == StatusCode.ERROR
        assert first.attributes["error.type"] == "django_leasejobs.retries.Retry"
        assert first.attributes["leasejobs.retry.after"] == 600.0
        assert second.status.status_code == StatusCode.UNSET
        assert (
            first.attributes["leasejobs.job.attempt"],
            second.attributes["leasejobs.job.attempt"],
        ) == (1, 2)
        for process in (first, second):
            assert [link.context.span_id for link in process.links] == [send.context.span_id]
        assert Job.objects.get(pk=job.pk).trace_context == {"traceparent": traceparent(send)}

    def test_a_snooze_is_not_an_error(self, spans: Any) -> None:
        retry_jobs.snooze_once.enqueue(600)
        assert drain().snoozed == 1
        process = spans.one("process default")
        assert process.status.status_code == StatusCode.UNSET
        assert "error.type" not in process.attributes
        assert process.attributes["leasejobs.snooze.after"] == 600.0
        assert not process.events

    def test_a_lost_lease_and_a_cancel_are_events(self, spans: Any) -> None:
        tracing_jobs.traced.enqueue("a")
        tracing_jobs.traced.enqueue("b")
        first, second = protocol.claim("w", batch=2)
        lost = threading.Event()
        lost.set()
        execution.execute(first, "w", lost)
        cancellation = Cancellation()
        cancellation.set("cancelled")
        execution.execute(second, "w", cancellation=cancellation)
        by_label = {span.attributes["messaging.message.id"]: span for span in process_spans(spans)}
        assert [e.name for e in by_label[str(first.pk)].events] == ["leasejobs.lease_lost"]
        (cancel,) = by_label[str(second.pk)].events
        assert (cancel.name, cancel.attributes["leasejobs.cancel.reason"]) == (
            "leasejobs.cancelled",
            "cancelled",
        )

    def test_a_replay_keeps_the_dead_jobs_context(self, spans: Any) -> None:
        job = tracing_jobs.broken.enqueue()
        drain()
        letter = DeadLetter.objects.get(job_id=job.pk)
        replayed = operations.replay(letter.pk)
        assert replayed.pk != job.pk
        stored = Job.objects.get(pk=job.pk).trace_context
        assert stored is not None
        assert Job.objects.get(pk=replayed.pk).trace_context == stored


@pytest.mark.django_db(transaction=True)
class TestWorker:
    def test_an_async_handlers_spans_nest_under_its_attempt(self, spans: Any) -> None:
        tracing_jobs.async_traced.enqueue("x")
        tracing_jobs.traced.enqueue("y")
        summary = Worker(concurrency=2, **WORKER).run(burst=True)
        assert summary.succeeded == 2
        processes = {span.attributes["leasejobs.job.name"]: span for span in process_spans(spans)}
        for label, name in (("x", "async_traced"), ("y", "traced")):
            process = processes[f"testapp.tracing_jobs.{name}"]
            assert spans.one(f"inside {label}").parent.span_id == process.context.span_id
        assert Job.objects.filter(status=Status.SUCCEEDED).count() == 2
