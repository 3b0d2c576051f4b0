"""Building a workflow: ``Workflow.add``, ``chain``, ``group(...).then(...)``.

Nothing is written until ``enqueue()``, which checks the whole graph (names, ``after``,
cycles, each signature's arguments with its placeholder) before its one transaction. Imports
no model at load: ``from django_leasejobs import Workflow`` works before Django's apps are
ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.signatures import Signature, signatures
from ..errors import WorkflowError

if TYPE_CHECKING:
    from ..models import WorkflowRun

CANCEL, RUN, HOLD, ON_FAILURE = "cancel", "run", "hold", "on_failure"


@dataclass(eq=False)
class Step:
    """A step of a workflow being built: pass it in another step's ``after``. ``id`` is set
    once the workflow is enqueued (its ``WorkflowStep`` row)."""

    workflow: Workflow
    name: str
    signature: Signature
    after: tuple[Step | str, ...]
    on_parent_failure: str = CANCEL
    results_as_list: bool = False
    named: bool = field(default=True, repr=False)
    id: int | None = None

    def __repr__(self) -> str:
        return f"<step {self.name}: {self.signature!r}>"


class Workflow:
    """A graph of steps, enqueued as one run (docs/workflows.md).

    ``wf.add(sig, after=[...], name=None, on_parent_failure="cancel")`` returns a ``Step``;
    ``wf.enqueue()`` writes the run, its steps and the jobs of the steps without parents in
    one transaction and returns the ``WorkflowRun``.
    """

    def __init__(self, name: str = "") -> None:
        if not isinstance(name, str) or len(name) > 200:
            raise WorkflowError(
                f"A workflow's name is a string of at most 200 characters: {name!r}."
            )
        self.name = name
        self._steps: dict[str, Step] = {}
        self._numbered: dict[str, int] = {}
        """The last number a default name took per function name: the next search starts
        after it (every number below is taken), so naming n steps is linear, not quadratic."""

    @property
    def steps(self) -> list[Step]:
        """The steps in the order they were added."""
        return list(self._steps.values())

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r}: {len(self._steps)} steps>"

    def add(
        self,
        signature: Signature,
        after: Iterable[Step | str] = (),
        name: str | None = None,
        on_parent_failure: str = CANCEL,
    ) -> Step:
        """Add a step running ``signature`` once every step of ``after`` (steps of this
        workflow, or their names) has ended. ``name`` defaults to the job's function name, with
        ``-2``, ``-3``... on repeats. ``on_parent_failure``: ``"cancel"`` (this step and what
        follows it), ``"run"`` (run anyway) or ``"hold"`` (wait for an operator)."""
        from ..protocol.workflow_specs import check_policy

        return self._add(signature, after, name, check_policy(on_parent_failure))

    def on_failure(self, signature: Signature, name: str | None = None) -> Workflow:
        """Run ``signature`` once, as soon as any step added so far ends dead or cancelled
        (skipped when they all succeed). Its arguments are its own (no placeholder)."""
        self._add(signature, list(self._steps.values()), name, ON_FAILURE)
        return self

    def _add(
        self,
        signature: Any,
        after: Iterable[Step | str],
        name: str | None,
        policy: str,
        *,
        results_as_list: bool = False,
    ) -> Step:
        if not isinstance(signature, Signature):
            raise TypeError(
                "Workflow.add() takes a signature: fn.s(...) or fn.si(...), not "
                f"{type(signature).__name__} {signature!r}."
            )
        parents = tuple(self._parent(item) for item in after)
        if len(set(map(_name_of, parents))) != len(parents):
            raise WorkflowError(f"after names a step twice: {[_name_of(p) for p in parents]}.")
        if name is None:
            name, named = self._free_name(signature.function_name), False
        else:
            from ..protocol.workflow_specs import check_name

            named = True
            if check_name(name) in self._steps:
                raise WorkflowError(f"This workflow already has a step named {name!r}.")
        step = Step(self, name, signature, parents, policy, results_as_list, named)
        self._steps[name] = step
        return step

    def _parent(self, item: Any) -> Step | str:
        if isinstance(item, Step):
            if item.workflow is not self or self._steps.get(item.name) is not item:
                raise WorkflowError(f"{item!r} in after is a step of another workflow.")
            return item
        if isinstance(item, str):
            return item  # checked at enqueue: it may name a step added later
        raise TypeError(
            f"after takes steps (what add() returned) or step names, not {type(item).__name__}."
        )

    def _free_name(self, base: str) -> str:
        """``base``, or ``base-2``, ``base-3``... the first no step has."""
        if base not in self._steps:
            return base
        n = self._numbered.get(base, 1) + 1
        while f"{base}-{n}" in self._steps:
            n += 1
        self._numbered[base] = n
        return f"{base}-{n}"

    def enqueue(self) -> WorkflowRun:
        """Check the graph, then write the run in one transaction (the caller's, when there is
        one) and return it; the steps' ``id`` are set."""
        from ..protocol.workflow_runs import enqueue_run
        from ..protocol.workflow_specs import spec_of
        from ..runtime import inprocess

        ordered = self._ordered()
        specs = [
            spec_of(
                step.signature,
                step.name,
                [_name_of(parent) for parent in step.after],
                step.on_parent_failure,
                results_as_list=step.results_as_list,
            )
            for step in ordered
        ]
        run, ids = enqueue_run(self.name, specs)
        for step in ordered:
            step.id = ids[step.name]
        inprocess.workflow_enqueued(run.pk, run._state.db)  # LEASEJOBS_EAGER (tests)
        return run

    def _ordered(self) -> list[Step]:
        """The steps, parents first; ``WorkflowError`` for an ``after`` naming no step, or a
        cycle (named step by step)."""
        if not self._steps:
            raise WorkflowError("A workflow needs at least one step.")
        for step in self._steps.values():
            for parent in step.after:
                if _name_of(parent) not in self._steps:
                    raise WorkflowError(
                        f"Step {step.name!r} runs after {_name_of(parent)!r}, which is not a "
                        f"step of this workflow (its steps: {', '.join(self._steps)})."
                    )
        done: dict[str, Step] = {}
        visiting: list[str] = []

        def visit(step: Step) -> None:
            if step.name in done:
                return
            if step.name in visiting:
                cycle = [*visiting[visiting.index(step.name) :], step.name]
                raise WorkflowError(f"The steps form a cycle: {' -> '.join(reversed(cycle))}.")
            visiting.append(step.name)
            for parent in step.after:
                visit(self._steps[_name_of(parent)])
            visiting.pop()
            done[step.name] = step

        for step in self._steps.values():
            visit(step)
        return list(done.values())


def _name_of(parent: Step | str) -> str:
    return parent.name if isinstance(parent, Step) else parent


def _signatures(items: tuple[Any, ...], what: str) -> list[Signature]:
    """Signatures given one by one, or as one iterable (a generator, a list)."""
    if len(items) == 1 and not isinstance(items[0], Signature):
        if not isinstance(items[0], Iterable) or isinstance(items[0], str | bytes | dict):
            return signatures(items, what)
        return signatures(list(items[0]), what)
    return signatures(items, what)


def chain(*items: Any, name: str = "") -> Workflow:
    """Steps one after another, each taking the previous one's result as its first argument
    (``fn.si`` ignores it): a ``Workflow``, enqueued with ``.enqueue()``."""
    sigs = _signatures(items, "chain()")
    if not sigs:
        raise WorkflowError("chain() needs at least one signature.")
    workflow = Workflow(name)
    previous: Step | None = None
    for sig in sigs:
        previous = workflow._add(sig, [previous] if previous else [], None, CANCEL)
    return workflow


class Group:
    """Members that run at once, then a callback with their results (``.then``), and a step
    for when one fails (``.on_failure``). Enqueued with ``.enqueue()``, as a ``Workflow``."""

    def __init__(self, members: Sequence[Signature], name: str = "") -> None:
        self.members = list(members)
        self.name = name
        self._then: Signature | None = None
        self._on_failure: Signature | None = None

    def __repr__(self) -> str:
        return f"<group of {len(self.members)}>"

    def then(self, callback: Signature) -> Group:
        """Run ``callback`` once, after every member succeeded, with the list of their results
        in member order as its first argument (``.si``: without it)."""
        self._then = signatures([callback], "then()")[0]
        return self

    def on_failure(self, callback: Signature) -> Group:
        """Run ``callback`` once, as soon as a member ends dead or cancelled."""
        self._on_failure = signatures([callback], "on_failure()")[0]
        return self

    def workflow(self) -> Workflow:
        """The group as a ``Workflow`` (to add more steps after its callback, say)."""
        workflow = Workflow(self.name)
        members = [workflow._add(sig, [], None, CANCEL) for sig in self.members]
        if self._then is not None:
            workflow._add(self._then, members, None, CANCEL, results_as_list=True)
        if self._on_failure is not None:
            if not members:
                raise WorkflowError("on_failure() needs a group with members.")
            workflow._add(self._on_failure, members, None, ON_FAILURE)
        return workflow

    def enqueue(self) -> WorkflowRun:
        return self.workflow().enqueue()


def group(*items: Any, name: str = "") -> Group:
    """Members run at once (``group(resize.s(i) for i in ids)``); ``.then(cb)`` for fan-in.
    An empty group's callback runs at once, with an empty list."""
    return Group(_signatures(items, "group()"), name)
