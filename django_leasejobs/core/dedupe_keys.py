"""Dedupe keys made from a job's arguments, and the window a key is bucketed into.

``dedupe_key=True`` hashes the call (the job's name and its arguments bound to the function's
signature, as canonical JSON), so ``send(1)`` and ``send(user_id=1)`` are the same call; a
template such as ``"user:{user_id}"`` is formatted with the bound arguments. With
``dedupe_period`` the key ends with ``@`` and the start of its window (Unix seconds), so each
window holds its own key.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import json
import math
import re
import string
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import JobValidationError

_ROOT = re.compile(r"^([^.\[]*)")


def parameters(func: Callable[..., Any], takes_context: bool) -> inspect.Signature:
    """The signature callers enqueue against (without the context a worker passes first)."""
    signature = inspect.signature(func)
    params = list(signature.parameters.values())
    return signature.replace(parameters=params[1:] if takes_context else params)


def check_template(template: Any, signature: inspect.Signature) -> None:
    """Refuse, at ``@job`` time, a template naming no argument of the function."""
    if not isinstance(template, str) or not template:
        raise JobValidationError(f"dedupe_key must be True or a template string, not {template!r}.")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise JobValidationError(f"dedupe_key template {template!r}: {exc}.") from None
    for field in fields:
        match = _ROOT.match(field)
        root = match.group(1) if match else ""
        if root not in signature.parameters:
            raise JobValidationError(
                f"dedupe_key template {template!r} names {{{field}}}, which is not an argument "
                f"of the job (its arguments: {', '.join(signature.parameters) or 'none'})."
            )


def _bound(signature: inspect.Signature, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise JobValidationError(
            f"The arguments do not fit the job's signature, so no dedupe key can be made: {exc}."
        ) from None
    bound.apply_defaults()
    return bound.arguments


def derive(
    rule: Any,
    name: str,
    signature: inspect.Signature | None,
    args: Sequence[Any],
    kwargs: dict[str, Any],
) -> str:
    """The key ``rule`` (True or a template) makes of this call."""
    arguments = _bound(signature, args, kwargs) if signature else {"args": args, "kwargs": kwargs}
    if rule is True:
        canonical = json.dumps(
            [name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return "args:" + hashlib.sha256(canonical.encode()).hexdigest()
    try:
        return str(rule).format_map(arguments)
    except (KeyError, IndexError, AttributeError, ValueError, TypeError) as exc:
        raise JobValidationError(
            f"dedupe_key template {rule!r} cannot be filled from these arguments: {exc!r}."
        ) from None


def bucketed(key: str, period: float, when: dt.datetime) -> str:
    """``key`` in the window of ``period`` seconds that holds ``when``."""
    start = math.floor(when.timestamp() / period) * period
    return f"{key}@{int(start)}"
