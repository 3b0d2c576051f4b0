"""Thresholds and the verdict they give on a ``Stats``: shared by ``checkjobs`` and the view.

A threshold is "passed" when a queue's number is strictly greater than it, so ``0`` means "none
allowed". Each queue is judged on its own numbers, so a report names the queue at fault; an
unset threshold (``None``) is not checked. ``max_stuck`` is the exception: stuck handlers belong
to workers, not queues, so it judges their total over the live workers (its problem names no
queue: ``queue`` is ``""``), and so is ``max_unknown`` (jobs waiting for a worker that knows
their name, over every queue). ``max_unserved_age`` judges a queue's oldest due age only while no
live worker serves that queue (:mod:`.unserved`), and unlike the others it is on by default.

With several queue databases (``LEASEJOBS_QUEUE_DATABASES``) each is judged on its own numbers
(:mod:`.shards`), and its problems name it (``database``); with one, they name none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ..core.conf import PREFIX, settings
from ..core.durations import format_age
from .stats import QueueStats, Stats
from .unserved import unserved_queues


@dataclass(frozen=True)
class Thresholds:
    """The largest healthy values; ``None`` leaves a number unchecked."""

    max_due_age: float | None = None
    max_dead_per_hour: int | None = None
    max_expired_leases: int | None = None
    max_paused_age: float | None = None
    max_stuck: int | None = None
    max_unserved_age: float | None = None
    max_unknown: int | None = None

    @classmethod
    def from_settings(cls) -> Thresholds:
        return cls(**{limit: getattr(settings, name) for _, limit, name in _CHECKS})

    def limit(self, metric: str) -> float | None:
        """By ``QueueStats`` field, so callers holding a ``Problem`` need not know our names."""
        return getattr(self, _LIMITS[metric])

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
    """One threshold passed by one queue (``max_stuck``: by the workers, ``queue`` is ""), or
    a queue database that cannot be read (``unreadable``: no threshold, ``value`` and ``limit``
    are 0)."""

    queue: str
    metric: str
    value: float
    limit: float
    job: str = ""
    """A paused job name (``paused_age`` of a job-name pause; ``queue`` is then ""); for
    ``unknown``, the names waiting and their counts."""
    database: str = ""
    """The queue database judged, when there are several (``LEASEJOBS_QUEUE_DATABASES``);
    "" with one, so a project with one database reads what it always read."""

    def __str__(self) -> str:
        said = self._said()
        return f"[{self.database}] {said}" if self.database else said

    def _said(self) -> str:
        if self.metric == UNREADABLE:
            return "cannot read the jobs table"
        if self.metric == "oldest_due_age":
            return (
                f"queue {self.queue!r}: the oldest due job has waited {int(self.value)} s "
                f"({format_age(self.value)}), more than {self.limit_text}: "
                "no worker is taking jobs from this queue, or workers are too few"
            )
        if self.metric == "paused_age":
            what = f"job {self.job!r}" if self.job else f"queue {self.queue!r}"
            return (
                f"{what}: paused for {int(self.value)} s "
                f"({format_age(self.value)}), more than {self.limit_text}: "
                "resume it (manage.py jobqueue resume) or raise the limit"
            )
        if self.metric == STUCK:
            return (
                f"workers: {int(self.value)} stuck handler(s), more than {self.limit_text}: "
                "their threads still run handlers whose attempt was ended (timeout or cancel); "
                "restart those workers (runjobworker --max-stuck does it)"
            )
        if self.metric == UNKNOWN:
            return (
                f"{int(self.value)} job(s) wait for a worker that knows their name, more than "
                f"{self.limit_text} ({self.job}): deploy workers whose code registers them; "
                "each is dead-lettered once LEASEJOBS_UNKNOWN_JOB_GRACE has passed"
            )
        if self.metric == UNSERVED:
            return (
                f"queue {self.queue!r}: due jobs have waited {int(self.value)} s "
                f"({format_age(self.value)}), more than {self.limit_text}, and no live worker "
                "serves this queue: start one without --queues (it serves every queue) or "
                f"with --queues {self.queue}{self._database_option}"
            )
        if self.metric == "dead_last_hour":
            return (
                f"queue {self.queue!r}: {int(self.value)} job(s) went dead in the last hour, "
                f"more than {self.limit_text}"
            )
        return (
            f"queue {self.queue!r}: {int(self.value)} running job(s) with an expired lease, "
            f"more than {self.limit_text}: their workers died and no worker recovers them"
        )

    @property
    def _database_option(self) -> str:
        """Where a worker must run to serve this database's queues, when there are several."""
        return f", and --database {self.database}" if self.database else ""

    @property
    def limit_text(self) -> str:
        """The limit as people read it (``300 s``, ``10``), for messages and the dashboard."""
        unit = " s" if self.metric in ("oldest_due_age", "paused_age", UNSERVED) else ""
        return _number(self.limit) + unit

    @property
    def setting(self) -> str:
        """The setting that holds this limit when it is not given as an option or parameter."""
        name = _SETTINGS.get(self.metric)  # none for an unreadable database
        return PREFIX + name if name else ""

    def as_dict(self) -> dict[str, Any]:
        found = {**asdict(self), "message": str(self)}
        if not self.database:
            del found["database"]  # one database: the JSON of before shards
        return found


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_CHECKS = (
    # (QueueStats field, Thresholds field, conf.Settings name)
    ("oldest_due_age", "max_due_age", "HEALTH_MAX_DUE_AGE"),
    ("dead_last_hour", "max_dead_per_hour", "HEALTH_MAX_DEAD_PER_HOUR"),
    ("expired_leases", "max_expired_leases", "HEALTH_MAX_EXPIRED_LEASES"),
    ("paused_age", "max_paused_age", "HEALTH_MAX_PAUSED_AGE"),
    ("stuck", "max_stuck", "HEALTH_MAX_STUCK"),
    ("unserved", "max_unserved_age", "HEALTH_MAX_UNSERVED_AGE"),
    ("unknown", "max_unknown", "HEALTH_MAX_UNKNOWN"),
)
STUCK = "stuck"
"""The one metric of the workers, not of a queue: ``Stats.stuck``."""
UNKNOWN = "unknown"
"""Jobs waiting for a worker that knows their name, over every queue: ``Stats.unknown_total``."""
UNSERVED = "unserved"
"""A queue's oldest due age while no live worker serves it (:mod:`.unserved`)."""
UNREADABLE = "unreadable"
"""A queue database that could not be read: a problem of its own, never a threshold's."""
_LIMITS = {metric: limit for metric, limit, _ in _CHECKS}
_SETTINGS = {metric: name for metric, _, name in _CHECKS}


def evaluate(
    stats: Stats, thresholds: Thresholds, queues: Iterable[str] | None = None
) -> list[Problem]:
    """Every threshold passed, queue by queue; ``queues`` limits the check to those queues.

    A queue named in ``queues`` that holds no job at all is healthy (all its numbers are 0).
    Stuck handlers are judged over every worker, whatever ``queues`` says.
    A paused queue is not unhealthy for waiting (its held-back jobs are not counted as due);
    only ``max_paused_age`` judges how long it has been paused.
    """
    judged = stats.judged  # the queues left uncounted too: no threshold judges a count
    unserved = unserved_queues(judged, stats.workers)
    names = sorted(judged) if queues is None else sorted(set(queues))
    problems = []
    stuck_limit = thresholds.max_stuck
    if stuck_limit is not None and stats.stuck > stuck_limit:
        problems.append(Problem("", STUCK, stats.stuck, stuck_limit))
    unknown_limit = thresholds.max_unknown
    if unknown_limit is not None and stats.unknown_total > unknown_limit:
        waiting = ", ".join(f"{name} {count}" for name, count in stats.unknown.items())
        problems.append(Problem("", UNKNOWN, stats.unknown_total, unknown_limit, job=waiting))
    paused_limit = thresholds.max_paused_age
    if paused_limit is not None and queues is None:  # a job name's pause spans every queue
        for job, age in sorted(stats.paused_jobs.items()):
            if age > paused_limit:
                problems.append(Problem("", "paused_age", age, paused_limit, job=job))
    for name in names:
        numbers = judged.get(name, QueueStats())
        for metric in _LIMITS:
            if metric in (STUCK, UNKNOWN):
                continue
            limit = thresholds.limit(metric)
            value = unserved.get(name) if metric == UNSERVED else getattr(numbers, metric)
            if limit is not None and value is not None and value > limit:
                problems.append(Problem(name, metric, value, limit))
    return problems
