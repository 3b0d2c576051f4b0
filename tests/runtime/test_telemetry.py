"""An attempt's telemetry (``runtime/telemetry.py``): progress reports as events of its
``process`` span, and lost leases counted (``leasejobs.lease.lost``) where the worker learns
of them: a heartbeat, ``ctx.complete()`` refused (an event on the span too), the result's write
refused after the handler returned, a grouped completion refused; a workflow step's span linked
to its parents'. Recorded with the SDK's
in-memory exporter and reader (the ``spans`` and ``measurements`` fixtures, tests/spans.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import F
from django.test import override_settings
from testapp import jobs, tracing_jobs
from testapp import workflow_jobs as w

from django_leasejobs import chain, group, protocol
from django_leasejobs.errors import StaleAttemptError
from django_leasejobs.models import Job
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import attempt_ends, execution
from django_leasejobs.runtime.worker import Worker
from django_leasejobs.testing import drain

from .test_worker_parts import Parts

pytestmark = pytest.mark.django_db

WORKER = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05, "scheduler": False}


def reclaimed(job: Job) -> None:
    """Another worker took the job: its attempt (the fencing token) moved on."""
    Job.objects.filter(pk=job.pk).update(attempt=F("attempt") + 1)


def lost_leases(measurements: Any) -> dict[tuple[str, str], int]:
    """``leasejobs.lease.lost`` since the last read, by job name and how it was learnt."""
    points = measurements.read().get("leasejobs.lease.lost", [])
    found = {
        (p.attributes["leasejobs.job.name"], p.attributes["leasejobs.lease.detected_by"]): p.value
        for p in points
    }
    return {key: value for key, value in found.items() if value}


def progress_events(span: Any) -> list[tuple[Any, ...]]:
    return [
        (
            event.attributes["leasejobs.progress.done"],
            event.attributes.get("leasejobs.progress.total"),
            event.attributes.get("leasejobs.progress.message"),
        )
        for event in span.events
        if event.name == "leasejobs.progress"
    ]


class TestProgressEvents:
    def test_reports_are_events_throttled_as_the_writes_and_the_last_always(
        self, spans: Any
    ) -> None:
        jobs.report_progress.enqueue(3)
        assert drain().succeeded == 1
        # Three reports within a second: the first at once, the last as the span ends.
        assert progress_events(spans.one("process default")) == [
            (1, 3, "step 1"),
            (3, 3, "step 3"),
        ]

    def test_a_failed_attempts_last_report_is_an_event_before_its_exception(
        self, spans: Any
    ) -> None:
        jobs.progress_then_fail.enqueue()
        drain()
        process = spans.named("process default")[0]
        names = [event.name for event in process.events]
        assert names == ["leasejobs.progress", "leasejobs.progress", "exception"]
        assert progress_events(process)[-1] == (2, 2, "failing")

    def test_nothing_is_kept_for_events_when_nothing_records(self) -> None:
        job = jobs.report_progress.enqueue(3)
        (claimed,) = protocol.claim("w", batch=1)
        result = execution.execute(claimed, "w")
        assert result.context.span is None
        assert result.context._progress is not None
        assert result.context._progress._evented is None
        assert attempt_ends.write_result(result) is Outcome.SUCCEEDED
        assert Job.objects.get(pk=job.pk).progress["done"] == 3


@pytest.mark.django_db(transaction=True)
def test_an_async_handlers_reports_are_events_of_its_span(spans: Any) -> None:
    jobs.async_report_progress.enqueue(3)
    assert Worker(**WORKER).run(burst=True).succeeded == 1
    assert progress_events(spans.one("process default")) == [(1, 3, "step 1"), (3, 3, "step 3")]


class TestLostLeases:
    def test_a_refused_complete_is_an_event_and_counted_once(
        self, spans: Any, measurements: Any
    ) -> None:
        jobs.exactly_once.enqueue("x")
        (claimed,) = protocol.claim("w", batch=1)
        reclaimed(claimed)
        result = execution.execute(claimed, "w")
        assert isinstance(result.exception, StaleAttemptError)
        assert attempt_ends.write_result(result) is Outcome.STALE  # its failure is refused too
        events = [event.name for event in spans.one("process default").events]
        assert "leasejobs.lease_lost" in events
        assert lost_leases(measurements) == {("testapp.jobs.exactly_once", "write"): 1}

    def test_a_result_refused_after_the_handler_is_counted(self, measurements: Any) -> None:
        tracing_jobs.traced.enqueue("a")
        (claimed,) = protocol.claim("w", batch=1)
        result = execution.execute(claimed, "w")
        reclaimed(claimed)
        assert attempt_ends.write_result(result) is Outcome.STALE
        assert lost_leases(measurements) == {("testapp.tracing_jobs.traced", "write"): 1}

    def test_a_written_result_counts_nothing(self, measurements: Any) -> None:
        tracing_jobs.traced.enqueue("a")
        assert drain().succeeded == 1
        assert lost_leases(measurements) == {}

    def test_a_heartbeat_counts_a_lost_lease_once(self, measurements: Any) -> None:
        jobs.noop.enqueue_many([((), {})] * 2)
        parts = Parts()
        _, lost = parts.claim()
        reclaimed(lost.job)
        heartbeat = parts.heartbeat()
        heartbeat.beat()
        heartbeat.beat()
        assert lost.lease_lost.is_set()
        assert lost_leases(measurements) == {("testapp.jobs.noop", "heartbeat"): 1}
        # Nothing is written for it, so nothing more is counted.
        assert parts.writer.finished(lost, parts.run(lost)) is False
        assert lost_leases(measurements) == {}

    def test_a_refused_grouped_completion_is_counted(self, measurements: Any) -> None:
        jobs.noop.enqueue()
        parts = Parts()
        (slot,) = parts.claim()
        assert parts.writer.finished(slot, parts.run(slot)) is True  # waits for the flush
        reclaimed(slot.job)
        parts.completer.flush()
        assert parts.ledger.summary.stale == 1
        assert lost_leases(measurements) == {("testapp.jobs.noop", "write"): 1}


def spans_of(spans: Any, name: str) -> list[Any]:
    """The process spans of the jobs of ``name`` (a ``testapp.workflow_jobs`` function)."""
    wanted = f"testapp.workflow_jobs.{name}"
    return [
        s for s in spans.named("process default") if s.attributes["leasejobs.job.name"] == wanted
    ]


class TestWorkflowLinks:
    def test_a_steps_span_links_to_its_parents_spans(self, spans: Any) -> None:
        run = group(w.square.s(2), w.square.s(3)).then(w.total.s()).enqueue()
        assert drain().succeeded == 3
        squares = spans_of(spans, "square")
        (total,) = spans_of(spans, "total")
        assert len(squares) == 2
        assert {link.context.span_id for link in total.links} == {
            square.context.span_id for square in squares
        }
        assert {link.attributes["leasejobs.link"] for link in total.links} == {"workflow.parent"}
        assert {link.context.trace_id for link in total.links} != {total.context.trace_id}
        kept = Job.objects.filter(workflow_step__run_id=run.pk).values_list(
            "trace_context", flat=True
        )
        assert all(set(context) == {"process"} for context in kept)

    def test_none_links_no_parent(self, spans: Any) -> None:
        chain(w.square.s(2), w.total.si([1])).enqueue()
        with override_settings(LEASEJOBS_OTEL_SPAN_RELATIONSHIP="none"):
            assert drain().succeeded == 2
        (total,) = spans_of(spans, "total")
        assert not total.links

    def test_nothing_is_kept_or_read_when_nothing_records(self) -> None:
        run = chain(w.square.s(2), w.total.si([1])).enqueue()
        assert drain().succeeded == 2
        kept = Job.objects.filter(workflow_step__run_id=run.pk).values_list(
            "trace_context", flat=True
        )
        assert list(kept) == [None, None]


@pytest.mark.django_db(transaction=True)
def test_an_async_step_links_to_its_parent(spans: Any) -> None:
    chain(w.tick.si("first"), tracing_jobs.async_traced.si("x")).enqueue()
    assert Worker(**WORKER).run(burst=True).succeeded == 2
    (tick,) = spans_of(spans, "tick")
    (async_step,) = [
        span
        for span in spans.named("process default")
        if span.attributes["leasejobs.job.name"] == "testapp.tracing_jobs.async_traced"
    ]
    assert [link.context.span_id for link in async_step.links] == [tick.context.span_id]
