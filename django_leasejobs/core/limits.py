"""Concurrency and rate limits of a job: their options, checked once, and the keys they compute.

``@job(concurrency_key=..., concurrency_limit=N, rate_limit="100/m", rate_key=...)`` is parsed
here when the function is decorated, so a bad option fails at import, not on a worker. A key is
a ``str.format`` template over the function's argument names or a callable taking the job's
arguments; it is computed at enqueue and stored on the row, so the claim compares stored
strings and never calls user code. Without a key, the limit applies to the job name.
"""

from __future__ import annotations

import inspect
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import JobValidationError

MAX_KEY_LENGTH = 200
"""The width of the key columns on the job row."""

PERIODS = {"s": 1, "m": 60, "h": 3600}
"""Rate windows a ``rate_limit`` may name, in seconds."""

_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*([smh])\s*")

KeySource = str | Callable[..., Any] | None


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` starts in each window of ``period`` seconds."""

    limit: int
    period: int


def parse_rate(text: Any) -> Rate:
    """``"100/m"`` (also ``/s``, ``/h``, or ``"10/5m"``) as a ``Rate``; anything else refused."""
    if not isinstance(text, str):
        raise TypeError(f"rate_limit must be a string like '100/m', not {type(text).__name__}.")
    match = _RATE.fullmatch(text)
    if match is None:
        raise JobValidationError(
            f"rate_limit {text!r} is not 'COUNT/PERIOD' with PERIOD one of s, m, h "
            "(optionally with a multiple, as in '10/5m')."
        )
    limit, multiple, unit = int(match[1]), int(match[2] or 1), match[3]
    if limit < 1 or multiple < 1:
        raise JobValidationError(f"rate_limit {text!r} must allow at least 1 start per period.")
    return Rate(limit, multiple * PERIODS[unit])


def check_limit(value: Any, option: str) -> int:
    """A positive whole number of jobs (``bool`` is refused though it is an ``int``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{option} must be a positive int, not {type(value).__name__}.")
    if value < 1:
        raise JobValidationError(f"{option} must be at least 1, not {value}.")
    return value


class KeyFunction:
    """A limiter key for each enqueue: a template over argument names, a callable, or a name.

    Template fields must name parameters of ``signature``, the one callers enqueue against
    (without the context a worker passes first; checked at decoration); the arguments are
    bound to it at enqueue, so defaults fill fields too.
    """

    def __init__(
        self, source: KeySource, signature: inspect.Signature, option: str, name: str
    ) -> None:
        self.option = option
        self.constant: str | None = None
        self.template: str | None = None
        self.call: Callable[..., Any] | None = None
        self.signature = signature
        if source is None:
            self.constant = name
        elif isinstance(source, str):
            self._check_template(source)
            self.template = source
        elif callable(source):
            self.call = source
        else:
            raise TypeError(
                f"{option} must be a template string or a callable, not {type(source).__name__}."
            )

    def _check_template(self, template: str) -> None:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
        except ValueError as exc:
            raise JobValidationError(f"{self.option} {template!r}: {exc}.") from None
        params = self.signature.parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        for field in fields:
            head = re.split(r"[.\[]", field, maxsplit=1)[0]
            if not head or head.isdigit():
                raise JobValidationError(
                    f"{self.option} {template!r}: fields must name arguments, as in "
                    "'customer:{customer_id}'."
                )
            if head not in params and not takes_any:
                raise JobValidationError(
                    f"{self.option} {template!r} names {head!r}, which is not an argument of "
                    f"the job (its arguments: {', '.join(params) or 'none'})."
                )
        if not fields and len(template) > MAX_KEY_LENGTH:
            raise JobValidationError(f"{self.option} is longer than {MAX_KEY_LENGTH} characters.")

    def key(self, args: Any, kwargs: dict[str, Any]) -> str:
        """This enqueue's key; a key that cannot be computed refuses the enqueue."""
        if self.constant is not None:
            return self.constant
        if self.call is not None:
            try:
                value = self.call(*args, **kwargs)
            except Exception as exc:
                raise JobValidationError(f"{self.option} raised {exc!r}.") from exc
        else:
            value = self._format(args, kwargs)
        if not isinstance(value, str) or not value:
            raise JobValidationError(f"{self.option} must give a non-empty string, not {value!r}.")
        if len(value) > MAX_KEY_LENGTH:
            raise JobValidationError(
                f"{self.option} gave a key longer than {MAX_KEY_LENGTH} characters."
            )
        return value

    def _format(self, args: Any, kwargs: dict[str, Any]) -> str:
        assert self.template is not None
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise JobValidationError(f"{self.option}: the arguments do not fit: {exc}.") from None
        bound.apply_defaults()
        values = dict(bound.arguments)
        for param in self.signature.parameters.values():
            if param.kind is param.VAR_KEYWORD:
                values.update(values.pop(param.name, {}))
        try:
            return self.template.format(**values)
        except (KeyError, IndexError, AttributeError, ValueError, TypeError) as exc:
            # Fields index, look up and format the caller's values: "{items[0]}" of an int is a
            # TypeError, "{n:d}" of a string a ValueError. Each is bad input, as in dedupe keys.
            raise JobValidationError(
                f"{self.option} {self.template!r} cannot be filled: {exc!r}."
            ) from None


@dataclass(frozen=True)
class Limits:
    """A job's limits as decorated; ``values()`` gives the row's limit columns per enqueue."""

    concurrency: int | None = None
    concurrency_key: KeyFunction | None = None
    rate: Rate | None = None
    rate_key: KeyFunction | None = None

    @classmethod
    def from_options(
        cls,
        signature: inspect.Signature,
        name: str,
        *,
        concurrency_key: KeySource = None,
        concurrency_limit: Any = None,
        rate_limit: Any = None,
        rate_key: KeySource = None,
    ) -> Limits:
        if concurrency_key is not None and concurrency_limit is None:
            raise JobValidationError("concurrency_key needs concurrency_limit (how many at once).")
        if rate_key is not None and rate_limit is None:
            raise JobValidationError("rate_key needs rate_limit (as in '100/m').")
        limits = cls()
        if concurrency_limit is not None:
            limits = cls(
                check_limit(concurrency_limit, "concurrency_limit"),
                KeyFunction(concurrency_key, signature, "concurrency_key", name),
            )
        if rate_limit is not None:
            rate = parse_rate(rate_limit)
            limits = cls(
                limits.concurrency,
                limits.concurrency_key,
                rate,
                KeyFunction(rate_key, signature, "rate_key", name),
            )
        return limits

    def __bool__(self) -> bool:
        return self.concurrency is not None or self.rate is not None

    def values(self, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The limit columns of one job with these arguments (empty for an unlimited job)."""
        out: dict[str, Any] = {}
        if self.concurrency is not None and self.concurrency_key is not None:
            out["concurrency_key"] = self.concurrency_key.key(args, kwargs)
            out["concurrency_limit"] = self.concurrency
        if self.rate is not None and self.rate_key is not None:
            out["rate_key"] = self.rate_key.key(args, kwargs)
            out["rate_limit"] = self.rate.limit
            out["rate_period"] = self.rate.period
        return out
