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

Retention keeps pace with the workers. Jobs finish all the time, so under load rows pass
their age all the time: a round that deleted a batch's worth or more was behind, and the
holder starts the next round at its next tick, keeping its lease, instead of pausing. A tick
that ran out of budget with rows still to delete doubles the next tick's budget, up to
``MAX_TICK_BUDGET``; a tick that reached the end of a round within half of it halves it, down
to ``TICK_BUDGET`` (halving at every round's end made the budget, and the rows waiting, swing
back and forth under a steady load). So a quiet project prunes in short ticks and a busy one
spends on pruning what its finish rate needs, no more (the figures are in docs/benchmarks.md,
"Retention").

When a round that deleted less than a batch ends, the holder keeps its lease and pauses: a
lease, or a quarter of the shortest age when that is shorter (a row then waits at most that
long past its age, so a short age's history stays within about 1.25 times what the age
keeps). Then it renews its lease and starts the next round; a lease that runs out meanwhile
goes to any worker, which starts a new walk. A holder that stops or dies passes the lease on
the same way, by expiry; the next walk starts from the first key. Workers without the lease
ask again every quarter lease, so an idle project costs one UPDATE per worker per quarter
lease, and one short round of indexed look-ups per pause.
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
"""How long a taking or renewal holds the retention lease: also the longest pause between
rounds."""

BATCH = 500
"""Jobs per pruning transaction (``prunejobs --batch`` defaults to 1000)."""

TICK_BUDGET = 0.1
"""Seconds of the claim loop one tick may spend pruning while retention keeps up; it stops
after the batch that passes it."""

MAX_TICK_BUDGET = 0.2
"""The most a tick's budget grows to while retention is behind: the lease holder's claim loop
keeps the rest of each maintenance pass."""


@dataclass
class Walk:
    """One round: the states still to walk (each job state, then each state's workflow runs,
    named ``runs_<state>``), and the last id looked at in the first of them."""

    ages: dict[str, dt.timedelta]
    states: list[str]
    bounds: dict[str, dt.datetime | None] = field(default_factory=dict)
    after_id: int = 0
    deleted: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


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
        max_budget: float = MAX_TICK_BUDGET,
    ) -> None:
        self.worker_id = worker_id
        self._clock = clock
        self.lease_seconds = lease_seconds
        self.batch = batch
        self.budget = budget
        """The budget of a tick while retention keeps up."""
        self.max_budget = max(budget, max_budget)
        self.tick_budget = budget
        """The next tick's budget: doubled by a tick that ran out of it while behind."""
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
        deleted = self._prune(self._walk, now)
        if self._walk.states:  # out of budget with rows left: behind
            self.tick_budget = min(self.tick_budget * 2, self.max_budget)
            return deleted
        if self._clock() - now < self.tick_budget / 2:
            self.tick_budget = max(self.tick_budget / 2, self.budget)
        self._log_round(self._walk)
        behind = self._walk.total >= self.batch
        ages = self._walk.ages
        self._walk = None
        # Behind: rows pass their age as fast as workers finish jobs; the next tick renews
        # the lease and starts the next round. Otherwise pause, holding the lease: no other
        # worker starts a round before its end.
        self._next_try = now if behind else now + self.pause(ages)
        return deleted

    def pause(self, ages: dict[str, dt.timedelta]) -> float:
        """Seconds between a round that deleted less than a batch and the next one."""
        return min(self.lease_seconds, min(age.total_seconds() for age in ages.values()) / 4)

    def _prune(self, walk: Walk, started: float) -> int:
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
            # Done with this state when nothing is past it, or (jobs) less than a batch was:
            # jobs that finish meanwhile pass their age all the time, and a walk chasing them
            # would never go back to the jobs behind it that finished late (retries, long
            # jobs); the next round, at once when this one was behind, starts from the first
            # key. A batch of runs may stop short of ``batch`` by their steps.
            short = not state.startswith(RUNS) and count < self.batch
            if last == walk.after_id or short:
                walk.states.pop(0)
                walk.after_id = 0
                continue  # a look-up that found nothing costs no budget
            walk.after_id = last
            if self._clock() - started >= self.tick_budget:
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
