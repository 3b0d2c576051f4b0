"""``LEASEJOBS_RETENTION``: workers prune finished jobs past their age, one worker at a time.

Every worker's maintenance calls :meth:`Retention.tick`. The worker that holds the retention
lease (:func:`upkeep.take_lease`, a guarded UPDATE on one row, database time) walks the
finished jobs of each state in key order with :func:`upkeep.prune_finished`, the function
``prunejobs`` uses: short batches, each its own transaction, SKIP LOCKED where the database has
it, only final states, schedules' cursors untouched (so an old occurrence is never emitted
again). Then, the same way, the finished workflow runs whose jobs are gone, by the age of the
state they map to (:func:`upkeep.prune_runs`): a run's steps hold its jobs' arguments.
On PostgreSQL a round starts by dropping the history partitions past their age whole
(:mod:`upkeep.history`), and the walk then prunes only the rows outside every partition. A tick
does a few batches at most, so the claim loop that runs it is held for a moment only; the
walk's position stays in memory between ticks, and the holder renews its lease at each tick
while it walks.

When a walk ends, the holder keeps its lease until it expires: that is the pause between
rounds. Any worker then takes it and starts a new walk. A holder that stops or dies passes the
lease on the same way, by expiry; the next walk starts from the first key. Workers without the
lease ask again every quarter lease, so an idle project costs one UPDATE per worker per
quarter lease, and one short round of indexed look-ups per lease.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import upkeep
from ..core.conf import settings

logger = logging.getLogger("django_leasejobs")

LEASE_SECONDS = 60.0
"""How long a taking or renewal holds the retention lease: also the pause between rounds."""

BATCH = 500
"""Jobs per pruning transaction (``prunejobs --batch`` defaults to 1000)."""

TICK_BUDGET = 0.1
"""Seconds of the claim loop one tick may spend pruning; it stops after the batch that
passes it."""


@dataclass
class Walk:
    """One round: the states still to walk (each job state, then each state's workflow runs,
    named ``runs_<state>``), and the last id looked at in the first of them."""

    ages: dict[str, dt.timedelta]
    states: list[str]
    bounds: dict[str, dt.datetime | None] = field(default_factory=dict)
    after_id: int = 0
    deleted: dict[str, int] = field(default_factory=dict)


RUNS = "runs_"
"""The prefix of a walk's step over the workflow runs of a job state's age."""


class Retention:
    """Pruning by ``LEASEJOBS_RETENTION`` on one worker's maintenance tick.

    ``clock`` only paces the tries (a worker's clock never decides what is old: the cutoff is
    the database's now minus the age). Reads the setting at each tick, so a changed setting
    applies at the next round without a restart of tests that override it.
    """

    def __init__(
        self,
        worker_id: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        lease_seconds: float = LEASE_SECONDS,
        batch: int = BATCH,
        budget: float = TICK_BUDGET,
    ) -> None:
        self.worker_id = worker_id
        self._clock = clock
        self.lease_seconds = lease_seconds
        self.batch = batch
        self.budget = budget
        self._walk: Walk | None = None
        self._next_try = 0.0

    @property
    def walking(self) -> bool:
        """Whether this worker is in the middle of a round (it holds the lease)."""
        return self._walk is not None

    def tick(self) -> int:
        """Prune a few batches if this worker holds (or can take) the lease; return how many
        jobs (and workflow runs) it deleted. Database errors propagate; the walk then starts
        afresh a quarter lease later (a table not migrated yet must not fill the log every
        poll)."""
        ages = settings.RETENTION
        now = self._clock()
        if not ages or now < self._next_try:
            return 0
        try:
            return self._tick(ages, now)
        except BaseException:
            self._walk = None
            self._next_try = now + self.lease_seconds / 4
            raise

    def _tick(self, ages: dict[str, dt.timedelta], now: float) -> int:
        if not upkeep.take_lease(upkeep.RETENTION, self.worker_id, self.lease_seconds):
            self._walk = None  # another worker prunes; a later round starts from the first key
            self._next_try = now + self.lease_seconds / 4 * random.uniform(0.75, 1.25)
            return 0
        if self._walk is None:
            order = [str(state) for state in upkeep.PRUNABLE if state in ages]
            runs = [RUNS + state for state in order if state in upkeep.RUN_STATES]
            self._walk = Walk(dict(ages), order + runs, self._drop_partitions(ages, order))
        deleted = self._prune(self._walk)
        if not self._walk.states:
            self._log_round(self._walk)
            self._walk = None
            # Keep the lease to its end: no worker starts another round before then.
            self._next_try = now + self.lease_seconds
        return deleted

    def _prune(self, walk: Walk) -> int:
        started = self._clock()
        deleted = 0
        while walk.states:
            state = walk.states[0]
            jobs_state = state.removeprefix(RUNS)
            age = walk.ages[jobs_state]
            if state.startswith(RUNS):  # after every job state: the runs whose jobs went
                count, last = upkeep.prune_runs(
                    jobs_state, age, batch=self.batch, after_id=walk.after_id
                )
            else:
                count, last = upkeep.prune_finished(
                    jobs_state,
                    age,
                    batch=self.batch,
                    after_id=walk.after_id,
                    below=walk.bounds.get(jobs_state),
                )
            deleted += count
            walk.deleted[state] = walk.deleted.get(state, 0) + count
            if last == walk.after_id:  # nothing past it: this state is done
                walk.states.pop(0)
                walk.after_id = 0
                continue  # a look-up that found nothing costs no budget
            walk.after_id = last
            if self._clock() - started >= self.budget:
                break  # at least one batch per tick, then only while the budget lasts
        return deleted

    def _drop_partitions(
        self, ages: dict[str, dt.timedelta], states: list[str]
    ) -> dict[str, dt.datetime | None]:
        """At a round's start: drop the history partitions past their age (PostgreSQL), and
        bound each state's walk below the partitions that remain (``upkeep.walk_bound``)."""
        bounds = {}
        for state in states:
            upkeep.drop_expired(state, ages[state])
            bounds[state] = upkeep.walk_bound(state)
        return bounds

    def _log_round(self, walk: Walk) -> None:
        if any(walk.deleted.values()):
            logger.info(
                "worker.retention id=%s %s",
                self.worker_id,
                " ".join(f"{state}={count}" for state, count in walk.deleted.items()),
            )

    def give_up_lease(self) -> None:
        """At a clean stop: give up the lease if held, so another worker goes on at once."""
        if self._walk is not None:
            self._walk = None
            upkeep.give_up_lease(upkeep.RETENTION, self.worker_id)
