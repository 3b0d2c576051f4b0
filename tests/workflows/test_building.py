"""The Python API: signatures, names, and the bad input a workflow refuses before writing."""

from __future__ import annotations

import datetime as dt

import pytest
from testapp import workflow_jobs as w

from django_leasejobs import Workflow, chain, group, workflows
from django_leasejobs.errors import JobArgumentsError, JobValidationError, WorkflowError
from django_leasejobs.models import Job, WorkflowRun, WorkflowStep
from django_leasejobs.signatures import Signature

from .helpers import states

pytestmark = pytest.mark.django_db(transaction=True)


def _nothing_written() -> None:
    assert not WorkflowRun.objects.exists()
    assert not WorkflowStep.objects.exists()
    assert not Job.objects.exists()


def test_a_signature_holds_the_job_its_arguments_and_options() -> None:
    sig = w.store.using(queue="io", priority=3).s(where="disk")
    assert isinstance(sig, Signature)
    assert (sig.name, sig.args, sig.kwargs) == (w.store.name, (), {"where": "disk"})
    assert sig.options == {"queue": "io", "priority": 3}
    assert sig.takes_result
    assert not w.tick.si("x").takes_result
    assert repr(w.tick.si("x")) == "tick.si('x')"
    # On the job itself, option keywords are options, as enqueue() takes them.
    assert w.tick.s("x", priority=5).options == {"priority": 5}


def test_options_reach_the_released_job() -> None:
    later = dt.timedelta(hours=1)
    run = chain(w.fetch.using(queue="io", priority=7).s("u"), w.tick.using(delay=later).si("x"))
    enqueued = run.enqueue()
    first = Job.objects.get(workflow_step__run=enqueued)
    assert (first.queue, first.priority) == ("io", 7)


def test_dedupe_options_are_refused_on_a_step() -> None:
    with pytest.raises(JobValidationError, match="dedupe_key"):
        w.tick.using(dedupe_key="k").s("x")


def test_default_names_are_numbered_on_repeats() -> None:
    wf = Workflow(name="names")
    a, b, c = (wf.add(w.square.s(i)) for i in range(3))
    assert [a.name, b.name, c.name] == ["square", "square-2", "square-3"]
    named = wf.add(w.total.s(), after=[a, b, c], name="sum")
    run = wf.enqueue()
    assert named.id == WorkflowStep.objects.get(run=run, name="sum").pk
    assert states(run) == {
        "square": "released",
        "square-2": "released",
        "square-3": "released",
        "sum": "waiting",
    }
    assert WorkflowStep.objects.get(pk=named.id).pending_parents == 3


def test_enqueue_is_one_transaction_with_the_callers() -> None:
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        chain(w.fetch.s("u"), w.parse.s()).enqueue()
        raise RuntimeError("rolled back")
    _nothing_written()


def test_a_cycle_is_refused_naming_its_steps() -> None:
    wf = Workflow()
    wf.add(w.tick.si("a"), after=["c"], name="a")
    wf.add(w.tick.si("b"), after=["a"], name="b")
    wf.add(w.tick.si("c"), after=["b"], name="c")
    with pytest.raises(WorkflowError, match=r"cycle: (a|b|c) -> .* -> (a|b|c)"):
        wf.enqueue()
    _nothing_written()


def test_after_naming_no_step_is_refused() -> None:
    wf = Workflow()
    wf.add(w.tick.si("a"), name="a")
    wf.add(w.tick.si("b"), after=["nope"], name="b")
    with pytest.raises(WorkflowError, match="'nope', which is not a step"):
        wf.enqueue()
    _nothing_written()


def test_a_step_of_another_workflow_is_refused() -> None:
    other = Workflow().add(w.tick.si("a"))
    with pytest.raises(WorkflowError, match="another workflow"):
        Workflow().add(w.tick.si("b"), after=[other])


def test_duplicate_names_are_refused() -> None:
    wf = Workflow()
    wf.add(w.tick.si("a"), name="x")
    with pytest.raises(WorkflowError, match="already has a step named 'x'"):
        wf.add(w.tick.si("b"), name="x")


@pytest.mark.parametrize("bad", [w.tick, "tick", 3, None])
def test_anything_but_a_signature_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="signature"):
        Workflow().add(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="signatures"):
        chain(w.tick.si("a"), bad)
    with pytest.raises(TypeError, match="signatures"):
        group(w.tick.si("a"), bad)


def test_a_bad_policy_is_refused() -> None:
    with pytest.raises(WorkflowError, match="on_parent_failure must be one of 'cancel', 'run'"):
        Workflow().add(w.tick.si("a"), on_parent_failure="ignore")


def test_arguments_are_checked_with_the_placeholder_before_anything_is_written() -> None:
    # parse(page) gets the previous result: one more argument is one too many.
    with pytest.raises(JobArgumentsError, match="parse"):
        chain(w.fetch.s("u"), w.parse.s("extra")).enqueue()
    # si: no placeholder, so tick's own argument is missing.
    with pytest.raises(JobArgumentsError, match="tick"):
        chain(w.fetch.s("u"), w.tick.si()).enqueue()
    # The first step of a chain has no previous result.
    with pytest.raises(JobArgumentsError, match="fetch"):
        chain(w.fetch.s()).enqueue()
    with pytest.raises(JobValidationError, match="JSON"):
        chain(w.fetch.s(object())).enqueue()
    _nothing_written()


def test_an_empty_workflow_or_chain_is_refused() -> None:
    with pytest.raises(WorkflowError):
        Workflow().enqueue()
    with pytest.raises(WorkflowError):
        chain()


def test_the_run_is_returned_with_its_steps() -> None:
    run = chain(w.fetch.s("u"), w.parse.s(), name="order-42").enqueue()
    assert (run.name, run.status, run.steps_total) == ("order-42", "running", 2)
    assert [s.name for s in run.steps.all()] == ["fetch", "parse"]
    assert workflows.get(run.pk) == run
