"""Thresholds and the verdict they give on a ``Stats``: shared by ``checkjobs`` and the view.

A threshold is "passed" when a queue's number is strictly greater than it, so ``0`` means "none
allowed". Each queue is judged on its own numbers, so a report names the queue at fault; an
unset threshold (``None``) is not checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .conf import settings
from .durations import format_age
from .stats import QueueStats, Stats


@dataclass(frozen=True)
class Thresholds:
    """The largest healthy values; ``None`` leaves a number unchecked."""

    max_due_age: float | None = None
    max_dead_per_hour: int | None = None
    max_expired_leases: int | None = None

    @classmethod
    def from_settings(cls) -> Thresholds:
        return cls(
            max_due_age=settings.HEALTH_MAX_DUE_AGE,
            max_dead_per_hour=settings.HEALTH_MAX_DEAD_PER_HOUR,
            max_expired_leases=settings.HEALTH_MAX_EXPIRED_LEASES,
        )

    def override(self, **values: Any) -> Thresholds:
        """These thresholds with the given ones replaced (``None`` values are ignored)."""
        current = asdict(self)
        current.update({key: value for key, value in values.items() if value is not None})
        return Thresholds(**current)

    @property
    def empty(self) -> bool:
        return all(value is None for value in asdict(self).values())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Problem:
    """One threshold passed by one queue."""

    queue: str
    metric: str
    value: float
    limit: float

    def __str__(self) -> str:
        if self.metric == "oldest_due_age":
            return (
                f"queue {self.queue!r}: the oldest due job has waited {int(self.value)} s "
                f"({format_age(self.value)}), more than {_number(self.limit)} s: "
                "no worker is taking jobs from this queue, or workers are too few"
            )
        if self.metric == "dead_last_hour":
            return (
                f"queue {self.queue!r}: {int(self.value)} job(s) went dead in the last hour, "
                f"more than {_number(self.limit)}"
            )
        return (
            f"queue {self.queue!r}: {int(self.value)} running job(s) with an expired lease, "
            f"more than {_number(self.limit)}: their workers died and no worker recovers them"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "message": str(self)}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_CHECKS = (
    ("oldest_due_age", "max_due_age"),
    ("dead_last_hour", "max_dead_per_hour"),
    ("expired_leases", "max_expired_leases"),
)


def evaluate(
    stats: Stats, thresholds: Thresholds, queues: Iterable[str] | None = None
) -> list[Problem]:
    """Every threshold passed, queue by queue; ``queues`` limits the check to those queues.

    A queue named in ``queues`` that holds no job at all is healthy (all its numbers are 0).
    """
    names = sorted(stats.queues) if queues is None else sorted(set(queues))
    problems = []
    for name in names:
        numbers = stats.queues.get(name, QueueStats())
        for metric, limit_name in _CHECKS:
            limit = getattr(thresholds, limit_name)
            value = getattr(numbers, metric)
            if limit is not None and value > limit:
                problems.append(Problem(name, metric, value, limit))
    return problems
