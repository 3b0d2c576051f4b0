"""Fair ordering: ``@job(fair_key=...)``, ``.using(fair_key=..., fair_weight=N)``, and the
place in line each job of a key gets.

Start-time fair queuing, stamped at enqueue, with the queue's head as its clock: a key's jobs
follow one another a microsecond apart (``weight`` of them per microsecond), from the key's
last waiting job, or from the head of the queue's waiting fair jobs when the key has none
there (a newcomer goes behind what is being claimed now, not behind another key's backlog).
Keys that enqueue together interleave; a key of weight 2 gets two places for each of a
weight-1 key's. The place is written as the job's ``run_at``, so the claim orders by the
column it always did and pays nothing. A job given a later ``run_at`` keeps it and takes no
place: it is ordered by its time, as a job without a key is.
"""

from __future__ import annotations

import datetime as dt
import inspect
from dataclasses import dataclass
from typing import Any

from ..errors import JobValidationError
from .limits import MAX_KEY_LENGTH, KeyFunction, KeySource
from .validation import check_text

MAX_WEIGHT = 100
"""The largest ``fair_weight``: a key's share against a weight-1 key's."""

STEP = dt.timedelta(microseconds=1)
"""The distance between a key's consecutive places (timestamps keep microseconds)."""


def check_weight(value: Any) -> int:
    """A whole number from 1 to ``MAX_WEIGHT`` (``bool`` refused though it is an ``int``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WEIGHT:
        raise JobValidationError(
            f"fair_weight must be a whole number from 1 to {MAX_WEIGHT}, not {value!r}."
        )
    return value


def check_key(value: Any) -> str:
    """A fair key given as is (``.using(fair_key=...)``): a non-empty string that fits."""
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_LENGTH or "\x00" in value:
        raise JobValidationError(
            f"fair_key must be a non-empty string of at most {MAX_KEY_LENGTH} characters "
            f"without NUL, not {value!r}."
        )
    check_text(value, "fair_key")
    return value


@dataclass(frozen=True)
class Fairness:
    """A job's fair key as decorated; ``values()`` gives the row's fair columns per enqueue."""

    key: KeyFunction | None = None
    weight: int = 1

    @classmethod
    def from_options(
        cls,
        signature: inspect.Signature,
        name: str,
        *,
        fair_key: KeySource = None,
        fair_weight: Any = None,
    ) -> Fairness:
        if fair_key is None:
            if fair_weight is not None:
                raise JobValidationError("fair_weight needs fair_key (whose share it sets).")
            return cls()
        weight = 1 if fair_weight is None else check_weight(fair_weight)
        return cls(KeyFunction(fair_key, signature, "fair_key", name), weight)

    def __bool__(self) -> bool:
        return self.key is not None

    def values(
        self, args: Any, kwargs: dict[str, Any], key: str | None = None, weight: int | None = None
    ) -> dict[str, Any]:
        """The fair columns of one job: the call's ``key`` and ``weight`` over the decorated
        ones, and no place yet; all None for a job without a fair key (every row of a bulk
        insert has the same columns)."""
        if key is not None:
            key = check_key(key)
        elif self.key is not None:
            key = check_key(self.key.key(args, kwargs))
        if weight is not None:
            weight = check_weight(weight)
        if key is None:
            if weight is not None:
                raise JobValidationError("fair_weight needs a fair_key (whose share it sets).")
            return {"fair_key": None, "fair_weight": None, "fair_at": None}
        weight = weight if weight is not None else self.weight
        return {"fair_key": key, "fair_weight": weight, "fair_at": None}


@dataclass
class Place:
    """A key's place in line as an enqueue hands them out: ``taken`` jobs are at ``at``."""

    at: dt.datetime
    taken: int

    @classmethod
    def first(
        cls, now: dt.datetime, head: dt.datetime | None, last: dt.datetime | None, at_last: int
    ) -> Place:
        """Where a key's next job goes: after its last waiting job, or at the queue's head
        (never later than now) when it has none from there on."""
        clock = now if head is None else min(now, head)
        if last is None or last < clock:
            return cls(clock, 0)
        return cls(last, at_last)

    def take(self, weight: int) -> dt.datetime:
        """The next job's place: ``weight`` jobs share each microsecond."""
        if self.taken >= weight:
            self.at += STEP
            self.taken = 0
        self.taken += 1
        return self.at
