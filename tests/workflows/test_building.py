"""The Python API: signatures, names, and the bad input a workflow refuses before writing."""

from __future__ import annotations

import datetime as dt

import pytest
from testapp import workflow_jobs as w

from django_leasejobs import Workflow, chain, group, workflows
from django_leasejobs.core.signatures import Signature
from django_leasejobs.errors import JobArgumentsError, JobValidationError, WorkflowError
from django_leasejobs.models import Job, WorkflowRun, WorkflowStep

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


class _CountingSteps(dict):
    """A workflow's steps by name, counting the names looked up or walked."""

    looked = 0

    def __contains__(self, key: object) -> bool:
        type(self).looked += 1
        return super().__contains__(key)

    def __iter__(self):  # type: ignore[no-untyped-def]
        for key in super().__iter__():
            type(self).looked += 1
            yield key


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[_CountingSteps]:
    """Every workflow built counts the step names its naming looks at."""
    from django_leasejobs.workflows import building

    plain = building.Workflow.__init__

    def init(self: Workflow, name: str = "") -> None:
        plain(self, name)
        self._steps = _CountingSteps()

    monkeypatch.setattr(building.Workflow, "__init__", init)
    _CountingSteps.looked = 0
    return _CountingSteps


def _added(workflow: Workflow, n: int) -> Workflow:
    for i in range(n):
        workflow.add(w.square.s(i))
    return workflow


@pytest.mark.parametrize(
    "build",
    [
        lambda n: group(w.square.s(i) for i in range(n)).then(w.total.s()).workflow(),
        lambda n: chain(w.square.s(i) for i in range(n)),
        lambda n: _added(Workflow(), n),
    ],
    ids=["group", "chain", "add"],
)
def test_naming_n_steps_looks_at_a_few_names_each_not_at_every_step(counted, build) -> None:
    """Default names (``square``, ``square-2``...) cost a few lookups per step: a group of
    8,000 members took 10.6 s to build when each name was sought among every step."""
    build(2000)
    assert counted.looked <= 3 * 2000


def test_ctx_workflow_add_names_a_step_with_a_few_index_probes() -> None:
    """The n-th step of a name added to a running run: the database work grows with log n
    (probes of the unique (run, name) index), not with n (every step of that name read).
    Measured in SQLite's virtual machine instructions, a count of work, not a time."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite counts its virtual machine's instructions")
    from django_leasejobs.runtime.workflow_context import RunHandle

    def work_of_one_add(existing: int) -> int:
        run = Workflow().add(w.boom.s()).workflow.enqueue()  # running: its step never ends
        WorkflowStep.objects.bulk_create(
            WorkflowStep(run=run, name=f"tick-{n}", job_name=w.tick.name, args=["x"])
            for n in range(2, existing + 2)
        )
        WorkflowStep.objects.create(run=run, name="tick", job_name=w.tick.name, args=["x"])
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        connection.connection.set_progress_handler(count, 1)
        try:
            added = RunHandle(run.pk).add(w.tick.si("x"))
        finally:
            connection.connection.set_progress_handler(None, 1)
        assert added.name == f"tick-{existing + 2}"
        return steps[0]

    small, large = work_of_one_add(100), work_of_one_add(3200)
    assert large < 2 * small, (small, large)


def test_ctx_workflow_add_numbers_a_step_after_the_runs_steps_of_its_name() -> None:
    from django_leasejobs.runtime.workflow_context import RunHandle

    wf = Workflow()
    wf.add(w.boom.s())
    for name in ("tick", "tick-2", "tick-3", "tick-9"):  # tick-9 named by hand
        wf.add(w.tick.si("x"), name=name)
    handle = RunHandle(wf.enqueue().pk)
    assert [handle.add(w.tick.si("x")).name for _ in range(7)] == [
        "tick-4",
        "tick-5",
        "tick-6",
        "tick-7",
        "tick-8",
        "tick-10",
        "tick-11",
    ]
    assert handle.add(w.square.s(1)).name == "square"
