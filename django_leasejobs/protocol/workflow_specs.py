"""A workflow step as the protocol inserts it: a signature checked, named and placed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.signatures import Signature
from ..errors import WorkflowError
from ..models import Policy, TakesResult
from .new_rows import check_options
from .workflow_steps import encode_options

POLICIES = (Policy.CANCEL.value, Policy.RUN.value, Policy.HOLD.value)
"""What ``on_parent_failure`` takes (``on_failure`` steps are made by ``.on_failure()``)."""


@dataclass(frozen=True)
class StepSpec:
    """A step as the builder checked it: its call, its parents (step names) and policy."""

    name: str
    job_name: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any]
    takes_result: str
    on_parent_failure: str = Policy.CANCEL
    after: Sequence[str] = field(default_factory=tuple)
    named: bool = True
    """False: the name was the default (the function's), so a dynamic add may number it."""


def check_policy(policy: Any) -> str:
    if policy not in POLICIES:
        raise WorkflowError(
            f"on_parent_failure must be one of {', '.join(map(repr, POLICIES))}, not {policy!r}."
        )
    return str(policy)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name or len(name) > 200:
        raise WorkflowError(
            f"A step name is a non-empty string of at most 200 characters: {name!r}."
        )
    return name


def spec_of(
    signature: Any,
    name: str,
    after: Sequence[str],
    policy: str,
    *,
    results_as_list: bool = False,
    named: bool = True,
) -> StepSpec:
    """Check a signature's arguments as its enqueue will bind them and make its step.

    A step after one parent takes its result, after several (or a group's callback) the list
    of their results in ``after`` order; ``si``, a step without parents and an ``on_failure``
    step take none. Raises ``JobArgumentsError`` (a ``TypeError``) as an enqueue does.
    """
    if not isinstance(signature, Signature):
        raise TypeError(
            "A workflow step is a signature: fn.s(...) or fn.si(...), not "
            f"{type(signature).__name__} {signature!r}."
        )
    if not signature.takes_result or policy == Policy.ON_FAILURE:
        takes = TakesResult.NONE
    elif results_as_list or len(after) > 1:
        takes = TakesResult.LIST
    elif after:
        takes = TakesResult.ONE
    else:
        takes = TakesResult.NONE
    args, kwargs = signature.checked(placeholder=takes != TakesResult.NONE)
    check_options(signature.options)
    return StepSpec(
        name=check_name(name),
        job_name=signature.name,
        args=args,
        kwargs=kwargs,
        options=encode_options(signature.options),
        takes_result=takes,
        on_parent_failure=policy,
        after=tuple(after),
        named=named,
    )
