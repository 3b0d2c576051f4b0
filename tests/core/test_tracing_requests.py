"""One trace per request, with its jobs' spans linked: a project that runs OpenTelemetry's Django
instrumentation (``opentelemetry-instrumentation-django``) and the SDK sees the request that
enqueued a job and each attempt of that job, sync and async, from one another.

The instrumentation adds its middleware to ``settings.MIDDLEWARE`` for the test's duration and
takes it out after; the views are this module's own (``pytest.mark.urls``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path
from opentelemetry.trace import SpanKind, StatusCode
from testapp import tracing_jobs

from django_leasejobs.testing import drain

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


def enqueue_one(request: HttpRequest) -> HttpResponse:
    job = tracing_jobs.traced.enqueue("from a request")
    return HttpResponse(str(job.pk))


def enqueue_two(request: HttpRequest) -> HttpResponse:
    tracing_jobs.traced.enqueue("first")
    tracing_jobs.async_traced.enqueue("second")
    return HttpResponse("two")


def enqueue_broken(request: HttpRequest) -> HttpResponse:
    tracing_jobs.broken.enqueue()
    return HttpResponse("broken")


urlpatterns = [
    path("one/", enqueue_one),
    path("two/", enqueue_two),
    path("broken/", enqueue_broken),
]


@pytest.fixture
def instrumented(spans: Any) -> Iterator[Any]:
    """Django's instrumentation on (after the SDK's provider is set), off after the test."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    instrumentor.instrument()
    try:
        yield spans
    finally:
        instrumentor.uninstrument()


def request_span(spans: Any) -> Any:
    (server,) = [span for span in spans.all() if span.kind == SpanKind.SERVER]
    return server


def test_a_requests_job_is_sent_in_its_trace_and_run_in_a_linked_one(instrumented: Any) -> None:
    response = Client().get("/one/")
    assert response.status_code == 200
    assert drain().succeeded == 1
    spans = instrumented
    server, send = request_span(spans), spans.one("send default")
    assert send.context.trace_id == server.context.trace_id
    assert send.parent.span_id == server.context.span_id
    process = spans.one("process default")
    assert process.context.trace_id != server.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in process.links] == [
        (server.context.trace_id, send.context.span_id)
    ]
    assert spans.one("inside from a request").parent.span_id == process.context.span_id


def test_every_job_of_a_request_links_to_its_own_send_span(instrumented: Any) -> None:
    assert Client().get("/two/").status_code == 200
    assert drain().succeeded == 2
    spans = instrumented
    server = request_span(spans)
    sends = spans.named("send default")
    assert len(sends) == 2
    assert {send.parent.span_id for send in sends} == {server.context.span_id}
    linked = {
        link.context.span_id: process
        for process in spans.named("process default")
        for link in process.links
    }
    assert set(linked) == {send.context.span_id for send in sends}
    # The async handler's span nests under its own attempt, as the sync one's does.
    for label in ("first", "second"):
        inside = spans.one(f"inside {label}")
        assert inside.parent.span_id in {p.context.span_id for p in linked.values()}


def test_a_failed_job_is_an_error_in_its_own_trace_not_the_requests(instrumented: Any) -> None:
    assert Client().get("/broken/").status_code == 200
    assert drain().dead == 1
    spans = instrumented
    server, process = request_span(spans), spans.one("process default")
    assert server.status.status_code != StatusCode.ERROR
    assert process.status.status_code == StatusCode.ERROR
    assert process.links[0].context.trace_id == server.context.trace_id


def tree(spans: Any) -> str:
    """The spans as docs/observability.md shows them: each trace's spans nested under their
    parents (the request first, then each attempt by job id), traces named A, B, ... as they
    appear, links named by their span and trace."""
    finished = spans.all()
    names = {span.context.span_id: span.name for span in finished}
    children: dict[int | None, list[Any]] = {}
    for span in sorted(finished, key=lambda span: span.start_time):
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)
    traces: dict[int, str] = {}
    lines: list[str] = []

    def letter(trace_id: int) -> str:
        return traces.setdefault(trace_id, "ABCDEFGH"[len(traces)])

    def show(span: Any, depth: int) -> None:
        label = "  " * depth + span.name
        line = f"{label:<24} {span.kind.name:<9} trace {letter(span.context.trace_id)}"
        for link in span.links:
            line += f", linked to {names[link.context.span_id]!r} in trace"
            line += f" {letter(link.context.trace_id)}"
        lines.append(line)
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    def order(root: Any) -> tuple[bool, int]:
        return root.kind != SpanKind.SERVER, int(root.attributes.get("messaging.message.id", 0))

    for root in sorted(children[None], key=order):
        show(root, 0)
    return "\n".join(lines)


def documented_tree() -> str:
    """The text block under the docs' heading "One request and its jobs"."""
    page = (Path(__file__).parents[2] / "docs" / "observability.md").read_text()
    section = page.split("## One request and its jobs", 1)[1]
    return section.split("```text\n", 1)[1].split("```", 1)[0].rstrip("\n")


def test_the_docs_show_the_spans_of_one_request_and_its_jobs(instrumented: Any) -> None:
    assert Client().get("/two/").status_code == 200
    assert drain().succeeded == 2
    assert tree(instrumented) == documented_tree()
