"""Which waiting jobs match a test's expectation, and what it says when none (or some) do.

Arguments are compared as JSON, the form a worker hands them to the handler: a tuple equals a
list, a ``Decimal`` its string. ``kwargs`` match partially (the keys given must be equal);
``args`` match whole.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Max

from ..core.registry import JobSpec
from ..models import CLAIMABLE, Job
from ..models.databases import home_database, queue_databases

RUN_AT_TOLERANCE = dt.timedelta(seconds=1)
"""How far ``run_at`` may be from the expected time: delays are added to the database clock."""
LISTED = 20
"""Jobs a failure message lists at most."""

_scope: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "leasejobs_scope", default=None
)
"""Inside ``capture_jobs()``: the last job id of each queue database before the block."""


def name_of(job: Any) -> str:
    """A registered job (``@job``), a ``django.tasks`` ``Task`` or a job's name, as a name."""
    if isinstance(job, str):
        return job
    if isinstance(job, JobSpec):
        return job.name
    path = getattr(job, "module_path", None)
    if isinstance(path, str):
        return path
    raise TypeError(f"Expected a @job function, a Task or a job name, not {job!r}.")


def as_json(value: Any) -> Any:
    """``value`` as the handler will receive it after the JSON round trip."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


@dataclass
class Expected:
    """What a test expects of a job; ``None`` fields are not compared."""

    name: str | None = None
    args: list[Any] | None = None
    kwargs: dict[str, Any] | None = None
    queue: str | None = None
    run_at: dt.datetime | None = None
    given: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, job: Any = None, **given: Any) -> Expected:
        given = {key: value for key, value in given.items() if value is not None}
        args, kwargs = given.get("args"), given.get("kwargs")
        return cls(
            name=None if job is None else name_of(job),
            args=None if args is None else as_json(list(args)),
            kwargs=None if kwargs is None else as_json(dict(kwargs)),
            queue=given.get("queue"),
            run_at=given.get("run_at"),
            given=given,
        )

    def matches(self, row: Job) -> bool:
        if self.args is not None and row.args != self.args:
            return False
        if self.kwargs is not None and any(
            key not in row.kwargs or row.kwargs[key] != value for key, value in self.kwargs.items()
        ):
            return False
        return self.run_at is None or abs(row.run_at - self.run_at) <= RUN_AT_TOLERANCE

    def describe(self) -> str:
        parts = [self.name or "any job"]
        parts += [f"{key}={value!r}" for key, value in self.given.items()]
        return " ".join(parts)


def waiting(name: str | None = None, queue: str | None = None) -> list[Job]:
    """Jobs waiting to run (pending, or failed and due to retry), in the current scope, in
    every queue database (the home one first)."""
    marks = _scope.get()
    found: list[Job] = []
    for alias in queue_databases():
        rows = Job.objects.using(alias).filter(status__in=CLAIMABLE)
        if marks is not None:
            rows = rows.filter(pk__gt=marks.get(alias, 0))
        if name is not None:
            rows = rows.filter(name=name)
        if queue is not None:
            rows = rows.filter(queue=queue)
        found += rows.order_by("pk")
    return found


def enqueued(
    job: Any = None,
    *,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    queue: str | None = None,
    run_at: dt.datetime | None = None,
) -> list[Job]:
    """The waiting jobs that match, oldest first (inside ``capture_jobs()``: its block's)."""
    expected = Expected.of(job, args=args, kwargs=kwargs, queue=queue, run_at=run_at)
    return [row for row in waiting(expected.name, queue) if expected.matches(row)]


def listing(rows: list[Job]) -> str:
    """The lines a failure message shows for ``rows``."""
    if not rows:
        return "Nothing was enqueued."
    lines = [
        f"  #{row.pk} {row.name} args={row.args!r} kwargs={row.kwargs!r} queue={row.queue!r} "
        f"run_at={row.run_at.isoformat()}"
        for row in rows[:LISTED]
    ]
    if len(rows) > LISTED:
        lines.append(f"  ... and {len(rows) - LISTED} more")
    return "\n".join(lines)


def assert_enqueued(
    job: Any = None,
    *,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    queue: str | None = None,
    count: int | None = None,
    run_at: dt.datetime | None = None,
) -> list[Job]:
    """Fail unless a matching job waits (exactly ``count`` of them, if given); return them."""
    expected = Expected.of(job, args=args, kwargs=kwargs, queue=queue, run_at=run_at)
    found = [row for row in waiting(expected.name, queue) if expected.matches(row)]
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    wanted = "a job" if count is None else f"{count} job(s)"
    raise AssertionError(
        f"Expected {wanted} matching {expected.describe()}, found {len(found)}.\n"
        f"Enqueued instead:\n{listing(waiting())}"
    )


def refute_enqueued(
    job: Any = None,
    *,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    queue: str | None = None,
    run_at: dt.datetime | None = None,
) -> None:
    """Fail if any waiting job matches."""
    expected = Expected.of(job, args=args, kwargs=kwargs, queue=queue, run_at=run_at)
    found = [row for row in waiting(expected.name, queue) if expected.matches(row)]
    if found:
        raise AssertionError(
            f"Expected no job matching {expected.describe()}, found {len(found)}:\n{listing(found)}"
        )


@dataclass
class Captured:
    """What a ``capture_jobs()`` block enqueued: ``jobs`` is read again on each access."""

    since: int
    """The home queue database's last job id before the block."""
    until: int | None = None
    marks: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    """Each queue database's (last id before, last id after) the block."""

    @property
    def jobs(self) -> list[Job]:
        """The jobs enqueued in the block, by database (the home one first), then by id."""
        found: list[Job] = []
        for alias, (since, until) in self.marks.items():
            rows = Job.objects.using(alias).filter(pk__gt=since)
            if until is not None:
                rows = rows.filter(pk__lte=until)
            found += rows.order_by("pk")
        return found


def _last_ids() -> dict[str, int]:
    return {
        alias: Job.objects.using(alias).aggregate(last=Max("pk"))["last"] or 0
        for alias in queue_databases()
    }


@contextlib.contextmanager
def capture_jobs() -> Iterator[Captured]:
    """Scope ``enqueued`` / ``assert_enqueued`` / ``refute_enqueued`` to jobs enqueued inside.

    Job ids only grow, so "enqueued in the block" is "an id above the last one before it", in
    each queue database (ids repeat across databases).
    """
    before = _last_ids()
    captured = Captured(
        since=before[home_database()], marks={alias: (last, None) for alias, last in before.items()}
    )
    token = _scope.set(before)
    try:
        yield captured
    finally:
        _scope.reset(token)
        after = _last_ids()
        captured.until = after[home_database()]
        captured.marks = {alias: (before.get(alias, 0), last) for alias, last in after.items()}
