"""A workflow step's process span kept on its job (``protocol/step_traces.py``): fenced by the
attempt, on step jobs only, read back by the children in ``after`` order."""

from __future__ import annotations

import pytest
from django.db.models import F
from testapp import jobs
from testapp import workflow_jobs as w

from django_leasejobs import group, protocol
from django_leasejobs.models import Job, WorkflowEdge, WorkflowStep

pytestmark = pytest.mark.django_db

A = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
B = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}


def test_kept_with_the_token_and_read_by_the_child_in_after_order() -> None:
    run = group(w.square.s(2), w.square.s(3)).then(w.total.s()).enqueue()
    first, second = protocol.claim("w", batch=2)
    assert first.workflow_step_id is not None
    assert second.workflow_step_id is not None
    assert protocol.record_process_span(second.pk, second.attempt, B)
    assert protocol.record_process_span(first.pk, first.attempt, A)
    child = WorkflowStep.objects.get(run_id=run.pk, name="total")
    kept = {first.pk: A, second.pk: B}
    in_after_order = WorkflowEdge.objects.filter(child=child).order_by("position")
    expected = [kept[job_id] for job_id in in_after_order.values_list("parent__job_id", flat=True)]
    assert protocol.parent_process_spans(child.pk) == expected


def test_a_stale_token_or_a_job_alone_keeps_nothing() -> None:
    group(w.square.s(2)).then(w.total.s()).enqueue()
    alone = jobs.noop.enqueue()
    claimed = {job.pk: job for job in protocol.claim("w", batch=2)}
    step = next(job for job in claimed.values() if job.workflow_step_id is not None)
    Job.objects.filter(pk=step.pk).update(attempt=F("attempt") + 1)
    assert not protocol.record_process_span(step.pk, step.attempt, A)
    assert not protocol.record_process_span(alone.pk, claimed[alone.pk].attempt, A)
    assert set(Job.objects.values_list("trace_context", flat=True)) == {None}


def test_parents_that_kept_nothing_give_nothing() -> None:
    run = group(w.square.s(2)).then(w.total.s()).enqueue()
    child = WorkflowStep.objects.get(run_id=run.pk, name="total")
    assert protocol.parent_process_spans(child.pk) == []
