"""Queue depth, oldest due age and dead-letter rate: the one query module behind every face.

``jobstats``, ``checkjobs``, the health view, the Prometheus exporter and the admin dashboard all
read :func:`collect`, so they can never disagree about what "due" or "expired" means.

Why these numbers: a scheduler's characteristic failure is omission. When no worker runs, no job
fails and nothing raises; the only symptom is that due jobs get older. ``oldest_due_age`` turns
that silence into a number that grows, and ``expired_leases`` shows workers that died holding
jobs.

The live workers come with them, from the table their heartbeats write: how long since each
was last seen, how many jobs it holds and how many of its handlers are stuck (still running
after the worker ended their attempt at a timeout or cancel). ``stuck`` totals the workers not
lost (a lost worker's row is older than its lease: it died or stalled, and its numbers are old).

Cost: short read-only queries that do not grow with the backlog. Waiting rows are read a
queue at a time through the partial index ``leasejobs_waiting``: each count stops at
``dialects.COUNT_CAP`` rows (past it, PostgreSQL's planner estimates and the number is marked in
``approximate``) and the oldest due job is an index range's first entry. Running rows come
through ``leasejobs_running_lease``, dead letters through the index on ``created_at``; no query
reads finished rows; the workers' rows are one more query. Plans and figures at ten million
rows: docs/benchmarks.md ("At scale"). All times are the database's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from django.db.models import Count, Q

from .. import dialects, protocol
from ..core.conf import settings
from ..db import dbtime
from ..models import CLAIMABLE, IS_RUNNING, IS_WAITING, DeadLetter, Job, Pause, PauseKind, Worker
from ..models.databases import read_database

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


@dataclass
class QueueStats:
    """The numbers of one queue (or of all queues, for ``Stats.total``).

    ``pending`` counts every pending job, due or not; ``failed`` counts jobs waiting for a retry;
    ``due`` counts pending and failed jobs whose ``run_at`` has come (what a worker could claim
    now): the jobs a pause holds back are left out of ``due`` and ``oldest_due_age``, so a
    paused queue waits without turning unhealthy. ``paused_age`` is the seconds since the queue
    was paused (``None``: not paused). ``expired_leases`` counts running jobs whose lease ran
    out: their worker died or stalled and no worker has recovered them yet. ``oldest_due_age``
    is in seconds: the database's now minus the ``run_at`` of the oldest due job, 0 when
    nothing is due.
    """

    pending: int = 0
    due: int = 0
    running: int = 0
    failed: int = 0
    expired_leases: int = 0
    dead_last_hour: int = 0
    dead_last_day: int = 0
    oldest_due_age: float = 0.0
    paused_age: float | None = None
    approximate: dict[str, str] = field(default_factory=dict)
    """The counts that are not exact: field -> ``"estimate"`` (PostgreSQL's planner, past
    ``dialects.COUNT_CAP`` rows) or ``"at least"`` (the cap, on other databases). Empty: all
    exact."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self, name: str, counted: dialects.Count) -> None:
        """Add ``counted`` to the count ``name``, remembering when it is not exact."""
        setattr(self, name, getattr(self, name) + counted.value)
        if not counted.exact:
            self._approximate(name, counted.kind.value)

    def counted(self, name: str) -> dialects.Count:
        """The count ``name`` with its kind: its ``text()`` is ``12``, ``~12,345,678`` or
        ``10,000+``."""
        kind = self.approximate.get(name)
        return dialects.Count(getattr(self, name), dialects.CountKind(kind or "exact"))

    def _approximate(self, name: str, kind: str) -> None:
        # An estimate anywhere in a sum makes the sum an estimate; "at least" only otherwise.
        if self.approximate.get(name) != dialects.CountKind.ESTIMATE.value:
            self.approximate[name] = kind

    def add(self, other: QueueStats) -> None:
        """Fold another queue's numbers into these (sums, and the largest age)."""
        for name, kind in other.approximate.items():
            self._approximate(name, kind)
        for f in fields(self):
            if f.name in ("paused_age", "approximate"):
                continue  # paused: a queue's own state, the total is never paused
            if f.name == "oldest_due_age":
                self.oldest_due_age = max(self.oldest_due_age, other.oldest_due_age)
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class WorkerStats:
    """One worker's row: ``last_seen_age`` in seconds at the database's now; ``lost`` when that
    is more than the worker's lease (it died or stalled; pruning deletes the row later)."""

    worker_id: str
    host: str
    pid: int
    queues: str
    version: str
    concurrency: int
    async_concurrency: int
    running: int
    stuck: int
    started_at: dt.datetime
    last_seen_age: float
    lost: bool

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "started_at": self.started_at.isoformat()}


@dataclass
class Stats:
    """Per-queue numbers, their total, the database time they were taken at, the paused job
    names with the seconds each has been paused, and the workers by id.

    ``queues`` holds at most ``LEASEJOBS_STATS_MAX_QUEUES`` queues, counted in full;
    ``omitted`` the others, with every number but the counts (pending, failed, due), which
    would cost queries per queue. The health verdict judges both: nothing a threshold checks
    is ever left out.
    """

    queues: dict[str, QueueStats] = field(default_factory=dict)
    total: QueueStats = field(default_factory=QueueStats)
    now: dt.datetime | None = None
    paused_jobs: dict[str, float] = field(default_factory=dict)
    workers: list[WorkerStats] = field(default_factory=list)
    omitted: dict[str, QueueStats] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    """Jobs waiting for a worker that knows their name, by name (``protocol.waiting_unknown``)."""

    @property
    def stuck(self) -> int:
        """Stuck handlers over the workers not lost."""
        return sum(w.stuck for w in self.workers if not w.lost)

    @property
    def unknown_total(self) -> int:
        """Jobs waiting for a worker that knows their name, over every name."""
        return sum(self.unknown.values())

    @property
    def judged(self) -> dict[str, QueueStats]:
        """Every queue, counted or not: what the health thresholds judge."""
        return {**self.omitted, **self.queues}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: plain numbers and strings only."""
        return {
            "now": self.now.isoformat() if self.now is not None else None,
            "total": self.total.as_dict(),
            "queues": {name: stats.as_dict() for name, stats in sorted(self.queues.items())},
            "queues_omitted": len(self.omitted),
            "paused_jobs": dict(sorted(self.paused_jobs.items())),
            "workers": [w.as_dict() for w in self.workers],
            "stuck": self.stuck,
            "unknown_jobs": dict(self.unknown),
        }


COUNTS = ("pending", "failed", "due")


def collect(using: str | None = None, *, counts: bool = True) -> Stats:
    """Read every queue's numbers from the database, at the database's current time.

    Queues appear when they hold a pending, failed or running job or a dead letter of the last
    day, or are paused; the queues listed in ``LEASEJOBS_QUEUES`` (if set) always appear, with
    zeros. The first ``LEASEJOBS_STATS_MAX_QUEUES`` of them, declared ones first, then by
    name, are counted (three capped counts each); the rest are ``omitted``. ``counts=False``
    counts none: then the number of queries is the same whatever the number of queues (the
    anonymous health verdict, which judges no count).
    """
    alias = using or read_database()
    now = dbtime.db_now()
    declared = list(settings.QUEUES or ())
    queues: dict[str, QueueStats] = {name: QueueStats() for name in declared}

    def queue(name: str) -> QueueStats:
        return queues.setdefault(name, QueueStats())

    paused_queues, paused_jobs = _pauses(alias, now)
    for name, age in paused_queues.items():
        queue(name).paused_age = age
    for name, oldest in dialects.oldest_due(alias, now, paused_jobs).items():
        stats = queue(name)
        if oldest is not None and name not in paused_queues:
            stats.oldest_due_age = max(0.0, (now - oldest).total_seconds())
    _add_running(queue, alias, now)
    _add_dead(queue, alias, now)
    names = [*declared, *sorted(set(queues) - set(declared))]
    if counts:
        for name in names[: settings.STATS_MAX_QUEUES]:
            _count_waiting(queues[name], alias, name, now, name in paused_queues, paused_jobs)
    kept = names[: settings.STATS_MAX_QUEUES] if counts else names
    total = QueueStats()
    for stats in queues.values():
        total.add(stats)
    if len(kept) < len(names):
        for name in COUNTS:
            total.approximate.setdefault(name, dialects.CountKind.AT_LEAST.value)
    return Stats(
        queues={name: queues[name] for name in sorted(kept)},
        total=total,
        now=now,
        paused_jobs=paused_jobs,
        workers=_workers(alias, now),
        omitted={name: queues[name] for name in names if name not in kept},
        unknown=protocol.waiting_unknown(alias),
    )


def _count_waiting(
    stats: QueueStats,
    alias: str,
    name: str,
    now: dt.datetime,
    paused: bool,
    paused_jobs: dict[str, float],
) -> None:
    """A queue's pending, failed and due rows, through ``leasejobs_waiting``.

    Each count reads at most ``dialects.COUNT_CAP`` rows (beyond: an estimate, or "at least"), so
    the cost does not grow with the backlog. What a pause holds back is not due.
    """
    of_queue = Job.objects.using(alias).filter(IS_WAITING, queue=name)
    for status in CLAIMABLE:
        stats.record(str(status), dialects.count(of_queue.filter(status=status)))
    if paused:
        return
    due = of_queue.filter(run_at__lte=now)
    if paused_jobs:
        due = due.exclude(name__in=list(paused_jobs))
    stats.record("due", dialects.count(due))


def waiting_queues(alias: str) -> list[str]:
    """The queues holding a pending or failed job, in name order (one statement)."""
    return list(dialects.oldest_due(alias, dbtime.db_now(alias)))


def _add_running(queue: Callable[[str], QueueStats], alias: str, now: dt.datetime) -> None:
    running = (
        Job.objects.using(alias)
        .filter(IS_RUNNING)
        .order_by()
        .values("queue")
        .annotate(count=Count("id"), expired=Count("id", filter=Q(lease_expires_at__lt=now)))
    )
    for leased in running:
        stats = queue(leased["queue"])
        stats.running += leased["count"]
        stats.expired_leases += leased["expired"]


def _add_dead(queue: Callable[[str], QueueStats], alias: str, now: dt.datetime) -> None:
    dead = (
        DeadLetter.objects.using(alias)
        .filter(created_at__gte=now - DAY)
        .order_by()
        .values("queue")
        .annotate(day=Count("id"), hour=Count("id", filter=Q(created_at__gte=now - HOUR)))
    )
    for letters in dead:
        stats = queue(letters["queue"])
        stats.dead_last_day += letters["day"]
        stats.dead_last_hour += letters["hour"]


def _pauses(alias: str, now: dt.datetime) -> tuple[dict[str, float], dict[str, float]]:
    """Paused queues and paused job names, each with its age in seconds (a tiny table)."""
    by_kind: dict[str, dict[str, float]] = {PauseKind.QUEUE: {}, PauseKind.JOB: {}}
    for kind, name, at in Pause.objects.using(alias).values_list("kind", "name", "paused_at"):
        by_kind.setdefault(kind, {})[name] = max(0.0, (now - dbtime.as_aware(at)).total_seconds())
    return by_kind[PauseKind.QUEUE], by_kind[PauseKind.JOB]


def _workers(alias: str, now: dt.datetime) -> list[WorkerStats]:
    """Every worker's row, by id (one row per worker process: a small table)."""
    found = []
    for row in Worker.objects.using(alias).order_by("worker_id"):
        age = max(0.0, (now - dbtime.as_aware(row.last_seen_at)).total_seconds())
        found.append(
            WorkerStats(
                worker_id=row.worker_id,
                host=row.host,
                pid=row.pid,
                queues=row.queues,
                version=row.version,
                concurrency=row.concurrency,
                async_concurrency=row.async_concurrency,
                running=row.running,
                stuck=row.stuck,
                started_at=dbtime.as_aware(row.started_at),
                last_seen_age=age,
                lost=age > row.lease_seconds,
            )
        )
    return found
