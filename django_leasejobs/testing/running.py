"""Run jobs in the test's own thread and transaction, and move time by moving rows.

Everything here goes through what a worker uses (``protocol`` claims and reports,
``runtime.execution`` runs the handler), in the caller's connection, so it works inside a
``TestCase`` transaction where a worker's threads would see nothing. Time never moves: rows
do (``run_at``, leases), by database expressions as the suite's own tests do; the schedules'
occurrences in the time passed are emitted as a running scheduler would have, early.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import asdict, astuple, dataclass
from typing import Any

from django.db.models import F, Value
from django.db.models.expressions import ExpressionWrapper
from django.db.models.fields import DateTimeField

from .. import protocol
from ..core.conf import settings
from ..db.dbtime import DbNow
from ..models import CLAIMABLE, Job, Status
from ..models.databases import queue_databases, using_database
from ..protocol import Outcome
from ..runtime import inprocess, schedules
from ..runtime.worker import Summary, Worker
from ..upkeep import schedule_sync
from .matching import name_of

MAX_TRAVEL = 366 * 86400
"""Seconds one ``travel()`` moves at most: a datetime far past it would overflow."""

DRAIN_LIMIT = 10_000
"""Jobs one ``drain()`` runs at most: a job that enqueues itself would otherwise never end."""


def run_job(job: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run one handler as a worker would and return its result, or raise its error.

    The arguments are validated and stored as a job row, claimed (attempt 1, a real context
    whose ``first_time`` records effects) and read back through JSON; the outcome is recorded
    on the row like a worker's. Takes a ``@job`` function or a ``django.tasks`` ``Task``.
    """
    backend = getattr(job, "backend", None)
    if isinstance(backend, str) and hasattr(job, "module_path"):
        row = protocol.enqueue_task(name_of(job), args, kwargs, task_backend=backend)
    else:
        row = protocol.enqueue(name_of(job), args, kwargs)
    return inprocess.run_eagerly(row.pk)


@dataclass
class DrainSummary:
    """What a ``drain()`` ran, by outcome."""

    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0
    """Claimed, then cancelled before it reported (the report was refused)."""
    stale: int = 0
    snoozed: int = 0
    """The handler raised ``Snooze``: waiting again, its attempt not charged."""

    @property
    def total(self) -> int:
        return sum(astuple(self))

    def count(self, job_id: int, outcome: Outcome) -> None:
        """Each outcome but a refused report counts in the field named as its value."""
        if outcome in (Outcome.SUCCEEDED, Outcome.RETRIED, Outcome.DEAD, Outcome.SNOOZED):
            setattr(self, outcome.value, getattr(self, outcome.value) + 1)
        elif (
            Job.objects.using(protocol.job_database())
            .filter(pk=job_id, status=Status.CANCELLED)
            .exists()
        ):
            self.cancelled += 1
        else:
            self.stale += 1


def _waiting(queues: Sequence[str] | None) -> Any:
    rows = Job.objects.using(protocol.job_database()).filter(status__in=CLAIMABLE)
    return rows if queues is None else rows.filter(queue__in=list(queues))


def drain(
    queues: Sequence[str] | None = None, with_scheduled: bool = False, until_empty: bool = True
) -> DrainSummary:
    """Run due jobs in this process until none is due; return what happened to them.

    Retries run too once due (with ``with_scheduled``, at once: every waiting job is made due
    before each claim). ``until_empty=False`` runs only the jobs due when it starts. Due cron
    occurrences of ``LEASEJOBS_SCHEDULES`` and the database's schedules are emitted first.
    With shards (``LEASEJOBS_QUEUE_DATABASES``) every queue database is drained, in turn.
    """
    if isinstance(queues, str):
        raise ValueError("queues must be a list of queue names, not a string.")
    summary = DrainSummary()
    aliases = queue_databases()
    while True:  # shards: each queue database in turn, until a round finds nothing to run
        ran_in_round = 0
        for alias in aliases:
            with using_database(alias):
                ran = _drain(queues, with_scheduled, until_empty)
            for name, count in asdict(ran).items():
                setattr(summary, name, getattr(summary, name) + count)
            ran_in_round += ran.total
        if len(aliases) == 1 or not until_empty or not ran_in_round:
            return summary


def _drain(queues: Sequence[str] | None, with_scheduled: bool, until_empty: bool) -> DrainSummary:
    schedule_sync.sync_from_settings()
    schedules.tick()
    summary = DrainSummary()
    if not until_empty:
        due = _waiting(queues).filter(run_at__lte=DbNow())
        if with_scheduled:
            due = _waiting(queues)
        for job_id in list(due.order_by("-priority", "run_at", "pk").values_list("pk", flat=True)):
            ran = inprocess.run_one(job_id)
            if ran is not None:
                summary.count(job_id, ran[1])
        return summary
    while summary.total < DRAIN_LIMIT:
        if with_scheduled:
            _waiting(queues).filter(run_at__gt=DbNow()).update(run_at=DbNow())
        claimed = protocol.claim(
            inprocess.worker_id(), queues=queues, lease_seconds=settings.LEASE_SECONDS
        )
        if not claimed:
            return summary
        _, outcome = inprocess.run_claimed(claimed[0])
        summary.count(claimed[0].pk, outcome)
    raise RuntimeError(f"drain() ran {DRAIN_LIMIT} jobs and more are due: a job that never ends?")


class BurstWorker:
    """Runs a fresh burst ``Worker`` on each ``run()`` (a ``Worker`` runs once).

    Its threads have their own connections: rows must be committed (pytest's
    ``transaction=True``, Django's ``TransactionTestCase``); ``drain()`` serves ``TestCase``.
    Short lease, heartbeat and poll keep a test's burst quick.
    """

    def __init__(self, queues: Sequence[str] | None = None, **options: Any) -> None:
        self.queues = queues
        self.options = {"concurrency": 2, "lease": 5.0, "heartbeat": 0.5, "poll": 0.05, **options}

    def run(self) -> Summary:
        return Worker(self.queues, **self.options).run(burst=True)


def _earlier(column: str, seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(
        F(column) - Value(dt.timedelta(seconds=seconds)), output_field=DateTimeField()
    )


def travel(seconds: float) -> None:
    """Make due what would be due ``seconds`` from now, without sleeping or patching a clock.

    What is due now is emitted first, as ``drain()`` does (schedules synced, their due
    occurrences emitted under their misfire policy). Then the occurrences of the schedules in
    the next ``seconds`` are emitted, as a scheduler running all along would have
    (``schedules.pass_time``), and waiting jobs' ``run_at`` and running jobs' lease expiries
    move ``seconds`` into the past.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ValueError(f"travel() needs a number of seconds >= 0, not {seconds!r}.")
    if seconds > MAX_TRAVEL:
        raise ValueError(f"travel() moves at most {MAX_TRAVEL} seconds (a year), not {seconds!r}.")
    for alias in queue_databases():  # shards: each queue database
        with using_database(alias):
            _travel(seconds, alias)


def _travel(seconds: float, using: str) -> None:
    schedule_sync.sync_from_settings()
    schedules.tick()
    if seconds:
        schedules.pass_time(seconds)
    Job.objects.using(using).filter(status__in=CLAIMABLE).update(run_at=_earlier("run_at", seconds))
    Job.objects.using(using).filter(status=Status.RUNNING).update(
        lease_expires_at=_earlier("lease_expires_at", seconds)
    )
