"""Signatures: a job and its arguments, not yet enqueued (``fn.s(...)``, ``fn.si(...)``).

A workflow's step is a signature. Built with ``s`` it takes one leading placeholder, bound
when the step is released to its parent's result (a chain) or its parents' results (a group's
callback); with ``si`` it ignores them. The arguments are checked as an enqueue checks them,
with the placeholder in place, when the workflow is enqueued: the same ``JobArgumentsError``
(a ``TypeError``) or ``JobValidationError``, before anything is written. Imports no model, so
``from django_leasejobs import Workflow`` works before Django's apps are ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import JobValidationError
from . import json_values, registry

PLACEHOLDER = None
"""What stands for the parent's result while a signature's arguments are checked."""

UNSUPPORTED_OPTIONS = frozenset({"dedupe_key", "dedupe_states", "dedupe_period", "on_conflict"})
"""A step is its own job: deduplicating it against another job would hand back a job that is
not the step's, so these enqueue options are refused on a signature."""


@dataclass(frozen=True)
class Signature:
    """A registered job, its arguments and its enqueue options, as a workflow step will call it.

    ``takes_result``: ``fn.s(...)`` (True) receives its parents' result(s) as its first
    argument (after the context for a handler that takes one); ``fn.si(...)`` (False) does not.
    """

    job: registry.JobSpec
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    takes_result: bool = True

    def __post_init__(self) -> None:
        refused = sorted(UNSUPPORTED_OPTIONS & {k for k, v in self.options.items() if v})
        if refused:
            raise JobValidationError(
                f"A workflow step cannot take {', '.join(refused)}: each step is its own job."
            )

    @property
    def name(self) -> str:
        """The registered job's name."""
        return self.job.name

    @property
    def function_name(self) -> str:
        """The handler's own name: a step's default name."""
        return str(getattr(self.job.func, "__name__", self.job.name.rsplit(".", 1)[-1]))

    def __repr__(self) -> str:
        call = ", ".join(
            [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        )
        return f"{self.function_name}.{'s' if self.takes_result else 'si'}({call})"

    def checked(self, placeholder: bool) -> tuple[list[Any], dict[str, Any]]:
        """The arguments as JSON lists and dicts, refused as an enqueue refuses them; with
        ``placeholder``, checked with one leading argument more (the parents' result)."""
        args, kwargs = json_values.check_payload(self.args, self.kwargs)
        bound = [PLACEHOLDER, *args] if placeholder else args
        self.job.check_arguments(bound, kwargs)
        return args, kwargs


def signatures(values: Sequence[Any], what: str) -> list[Signature]:
    """``values`` as signatures, or a ``TypeError`` naming the first that is not one."""
    items = list(values)
    for position, value in enumerate(items):
        if not isinstance(value, Signature):
            raise TypeError(
                f"{what} takes signatures (fn.s(...) or fn.si(...)); item {position} is "
                f"{type(value).__name__}: {value!r}."
            )
    return items
