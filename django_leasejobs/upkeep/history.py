"""History partitions (PostgreSQL): made ahead by the workers, dropped whole by retention.

A worker holding the ``history_partitions`` lease (one at a time, no leader: the lease of
:mod:`.maintenance`) makes each final state's partitions from now to a little ahead every
``MAKE_EVERY`` seconds, so a completion never has to make one. Retention then drops a
partition once its upper bound is past its state's age: a catalog change, whatever the rows.
Before the drop, what hangs off its rows goes as pruning does it (dead letters and logs
deleted, effects kept with no job), and the rows pruning keeps (a replay's job while its dead
letter exists, a running workflow's jobs) are written back, into the state's DEFAULT partition.

Rows outside every range (the DEFAULT partitions, and finished rows still in the live partition
before ``movejobhistory`` moved them) are pruned row by row as before, below the oldest range's
lower bound (``walk_bound``): the batched walk never deletes inside a partition it will drop.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections.abc import Callable

from django.db import transaction
from django.db.models import Exists, Max, Min, OuterRef, Q

from .. import dialects
from ..db.dbtime import db_now
from ..db.deadlocks import retry_deadlocks
from ..models import DeadLetter, Effect, Job, JobLog, RunStatus, WorkflowStep
from ..models.databases import job_database
from .maintenance import give_up_lease, take_lease
from .pruning import PRUNABLE

logger = logging.getLogger("django_leasejobs")

PARTITIONS = "history_partitions"
"""The lease of making history partitions ahead."""

MAKE_EVERY = 300.0
"""Seconds between two makings (each makes at least ten minutes, and two spans, ahead)."""


class Partitions:
    """Making history partitions ahead, on one worker's maintenance tick (no-op but one
    catalog look-up where the job table is not partitioned)."""

    def __init__(self, worker_id: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.worker_id = worker_id
        self._clock = clock
        self._next_try = 0.0
        self._held = False

    def tick(self) -> list[str]:
        """Make the partitions due if this worker takes the lease; return their names."""
        now = self._clock()
        if now < self._next_try:
            return []
        alias = job_database()
        if not dialects.partitioned(alias):
            self._next_try = now + MAKE_EVERY
            return []
        self._held = take_lease(PARTITIONS, self.worker_id, MAKE_EVERY)
        if not self._held:
            self._next_try = now + MAKE_EVERY / 4 * random.uniform(0.75, 1.25)
            return []
        made = dialects.make_partitions(alias)
        if made:
            logger.info("history.partitions_made names=%s", ",".join(made))
        self._next_try = now + MAKE_EVERY
        return made

    def give_up_lease(self) -> None:
        if self._held:
            self._held = False
            give_up_lease(PARTITIONS, self.worker_id)


def _kept(rows: Q, alias: str) -> list[int]:
    """The ids among ``rows`` that pruning keeps (``upkeep.deletable`` says why). Each look-up
    starts from the few rows that keep a job (dead letters replayed, steps of running runs),
    never from the partition's millions."""
    ids = Job.objects.using(alias).filter(rows).values_list("pk", flat=True)
    replayed = DeadLetter.objects.using(alias).filter(replayed_job__isnull=False)
    running = WorkflowStep.objects.using(alias).filter(run__status=RunStatus.RUNNING)
    kept = set(ids.filter(pk__in=list(replayed.values_list("replayed_job_id", flat=True))))
    kept |= set(ids.filter(workflow_step_id__in=running.values("pk")))
    return sorted(kept)


def _forget_related(rows: Q, alias: str, kept: list[int]) -> None:
    """What hangs off the partition's jobs goes as pruning does it: dead letters and logs
    deleted, effects kept without their job. Read from those tables, within the partition's
    id range (a day's ids are a narrow range of them), so a partition of millions with
    nothing hanging off it costs two index look-ups."""
    bounds = Job.objects.using(alias).filter(rows).aggregate(low=Min("pk"), high=Max("pk"))
    if bounds["low"] is None:
        return
    in_partition = Job.objects.using(alias).filter(rows, pk=OuterRef("job_id"))
    for model in (Effect, DeadLetter, JobLog):
        related = (
            model.objects.using(alias)
            .filter(job_id__gte=bounds["low"], job_id__lte=bounds["high"])
            .filter(Exists(in_partition))
            .exclude(job_id__in=kept)
        )
        if model is Effect:
            related.update(job=None)
        else:
            related.delete()


def drop_expired(state: str, older_than: dt.timedelta) -> int:
    """Drop ``state``'s history partitions whose every row finished more than ``older_than``
    ago; return how many were dropped (0 where there are none, or the lock was not had in a
    second: the next round tries again)."""
    alias = job_database()
    partitions = dialects.history_partitions(alias, state)
    if not partitions:
        return 0
    cutoff = db_now(alias) - older_than
    dropped = 0
    for partition in partitions:
        if partition.upper > cutoff:
            break
        rows = Q(status=state, finished_at__gte=partition.lower, finished_at__lt=partition.upper)
        kept = _kept(rows, alias)
        _forget_related(rows, alias, kept)
        if not dialects.drop_partition(alias, state, partition, kept):
            logger.warning("history.drop_waiting partition=%s", partition.name)
            break
        dropped += 1
        logger.info("history.partition_dropped partition=%s kept=%s", partition.name, len(kept))
    return dropped


def walk_bound(state: str) -> dt.datetime | None:
    """The finish time below which ``state``'s rows are outside every range partition (the
    batched walk's upper bound); None where there are no partitions."""
    partitions = dialects.history_partitions(job_database(), state)
    return partitions[0].lower if partitions else None


def unmoved() -> Q:
    """Finished rows still in the live partition (written before the table was partitioned)."""
    return Q(in_history=False, status__in=PRUNABLE)


def prepare_move() -> int:
    """Before ``move_finished``: make the partitions the unmoved rows' finish times need;
    return how many were made (0 where the table is not partitioned)."""
    alias = job_database()
    if not dialects.partitioned(alias):
        return 0
    oldest = Job.objects.using(alias).filter(unmoved()).aggregate(Min("finished_at"))
    since = oldest["finished_at__min"]
    return len(dialects.make_partitions_since(alias, since)) if since else 0


@retry_deadlocks
def move_finished(*, batch: int = 1000, after_id: int = 0) -> tuple[int, int]:
    """Move one batch of finished rows from the live partition to the history's; return
    (rows moved, last id looked at). Call again with ``after_id`` until it comes back unchanged.

    Each batch is one short transaction over at most ``batch`` rows in key order, SKIP LOCKED:
    workers go on claiming and finishing beside it, and a crash loses nothing (a new run
    starts again from the first key and finds only what is left). The UPDATE sets the
    partition key and nothing else, so PostgreSQL moves each row whole.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, not {batch!r}.")
    alias = job_database()
    if not dialects.partitioned(alias):
        return 0, after_id
    with transaction.atomic(using=alias):
        chosen = (
            Job.objects.using(alias)
            .filter(unmoved(), pk__gt=after_id)
            .order_by("pk")
            .select_for_update(skip_locked=True)
        )
        ids = list(chosen.values_list("pk", flat=True)[:batch])
        if not ids:
            return 0, after_id
        moved = (
            Job.objects.using(alias).filter(pk__in=ids, in_history=False).update(in_history=True)
        )
    logger.info("history.moved count=%s first_id=%s last_id=%s", moved, ids[0], ids[-1])
    return moved, ids[-1]
