"""The steps of a claim of jobs with limits, written with the ORM (every database).

Why the limits hold with any number of claimers: a job with a limit starts only in a claim
that holds its key locked (``c:`` key, ``r:`` key; ``_lock_limiters``) from before it counts
the key's running jobs and reads its rate bucket until it commits the jobs it started and the
bucket it filled. Two claimers never hold one key at once (a key held by another claimer is
skipped this round, not waited for), and each counts after the previous holder committed, so
neither can start jobs the other's count did not include. Counts only fall without the lock (a
job finishes, an expired lease is recovered), which can only leave a slot unused until the
next claim. SQLite has no row locks: there the claim takes the database's write lock first,
which serializes it with every other claimer.

Jobs over a limit are left as they are: pending, ``run_at`` and ``attempt`` unchanged, so a
limit costs no writes while it holds jobs back. The candidates are a hint, read with full keys
and spent buckets left out, so a key's backlog never hides other keys, and the jobs without
limits are claimed by the plain claim (their own index), in one claim order.

``Dialect.claim_limited`` runs these steps in the ORM's order: the candidates, the heads of the
jobs without limits and the limiter rows of their keys before the claim's transaction (a row
lock needs a row, and creating one inside the transaction could make a claimer wait on
another's), then, in it, the keys locked and ``_start_within_limits``. PostgreSQL reads and
locks in one statement instead (``postgresql.limited``); the counts are always read after the
locks, in the transaction that starts the jobs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from ...db.dbtime import DbNow, as_aware
from ...models import CLAIMABLE, IS_WAITING, Job, Limiter, Status
from .expressions import start_attempts
from .pauses import not_paused
from .within_limits import (
    Bucket,
    Candidate,
    Fill,
    Head,
    Held,
    choose,
    fills,
    rate_lock,
)

LIMITED = Q(concurrency_key__isnull=False) | Q(rate_key__isnull=False)
"""Jobs with a limit: ``leasejobs_limited`` holds them, ``leasejobs_claimable`` the rest."""

UNLIMITED = Q(concurrency_key__isnull=True, rate_key__isnull=True)

ORDER = ("-priority", "run_at", "id")
"""The claim order: priority (high first), then ``run_at``, then id."""


def _due(alias: str, queues: Sequence[str] | None, kind: Q) -> QuerySet[Job]:
    due = Job.objects.using(alias).filter(IS_WAITING, kind, not_paused(alias), run_at__lte=DbNow())
    if queues is not None:
        due = due.filter(queue__in=list(queues))
    return due


class LimitedClaimSteps:
    """The ORM's way of each step of a limited claim; a dialect overrides those its database
    does differently."""

    def _start_within_limits(
        self, alias: str, worker_id: str, held: Held, batch: int, lease_seconds: float
    ) -> list[Job]:
        """In the claim's transaction, after the locks: count, choose, start, fill buckets."""
        if not held.candidates:
            return []
        ckeys = {c.concurrency_key for c in held.candidates if c.concurrency_key}
        rkeys = {c.rate_key for c in held.candidates if c.rate_key}
        running, buckets = self._limiter_state(alias, ckeys, rkeys)
        chosen = choose(held, batch, running, buckets)
        jobs = self._take(alias, worker_id, [c.id for c in chosen], lease_seconds)
        if rkeys:
            self._fill_buckets(alias, fills(jobs, buckets))
        return jobs

    def _limited_due(self, alias: str, queues: Sequence[str] | None, batch: int) -> bool:
        """Whether a job with limits is among the first ``batch`` due jobs in claim order.
        When none is, the claim is the plain claim: the limited claim would take the same jobs.

        Read in claim order, as the claim reads. Without an index of their own for jobs with
        limits (MySQL has no partial indexes), asking whether *any* is due read the whole due
        backlog on every claim. A dialect with such an index may answer for any due job."""
        head = _due(alias, queues, Q()).order_by(*ORDER)[:batch]
        return any(c or r for c, r in head.values_list("concurrency_key", "rate_key"))

    def _limited_candidates(
        self, alias: str, queues: Sequence[str] | None, count: int
    ) -> list[Candidate]:
        """The first ``count`` due jobs with limits, leaving out keys known to be full.

        Full concurrency keys (running jobs >= the job's own limit) and spent rate buckets are
        left out in the statement, so the backlog of a key at its limit is not what fills the
        read (it would hide other keys).
        """
        running = (
            Job.objects.using(alias)
            .filter(status=Status.RUNNING, concurrency_key=OuterRef("concurrency_key"))
            .order_by()
            .values("concurrency_key")
            .annotate(n=Count("id"))
            .values("n")
        )
        spent = Limiter.objects.using(alias).filter(blocked_until__gt=DbNow()).values("name")
        due = (
            _due(alias, queues, LIMITED)
            .annotate(key_running=Coalesce(Subquery(running), 0))
            .filter(Q(concurrency_key__isnull=True) | Q(key_running__lt=F("concurrency_limit")))
            .exclude(rate_key__in=spent)
            .order_by(*ORDER)
        )
        return [Candidate(*row) for row in due.values_list(*Candidate._fields)[:count]]

    def _unlimited_heads(self, alias: str, queues: Sequence[str] | None, count: int) -> list[Head]:
        """The claim order of the first ``count`` due jobs without limits."""
        due = _due(alias, queues, UNLIMITED).order_by(*ORDER)
        return [Head(*row) for row in due.values_list(*Head._fields)[:count]]

    def _add_limiters(self, alias: str, keys: Iterable[str]) -> None:
        """Create the limiter rows of ``keys`` that do not exist yet (outside the claim)."""
        wanted = set(keys)
        limiters = Limiter.objects.using(alias)
        missing = wanted - set(limiters.filter(key__in=wanted).values_list("key", flat=True))
        rows = [Limiter(key=key, name=key[2:]) for key in sorted(missing)]
        if rows:
            # A racing claimer may create them first: nothing to do then.
            limiters.bulk_create(rows, ignore_conflicts=True)

    def _lock_limiters(self, alias: str, keys: Iterable[str]) -> set[str]:
        """Lock ``keys`` until the transaction ends (here: their limiter rows); return those
        locked. The first statement of the claim's transaction.

        SKIP LOCKED: a key another claimer holds is left for this round, not waited for, so
        claimers never queue behind one another (nor deadlock) on a busy key.
        """
        locked = (
            Limiter.objects.using(alias)
            .filter(key__in=sorted(set(keys)))
            .order_by("key")
            .select_for_update(skip_locked=True)
            .values_list("key", flat=True)
        )
        return set(locked)

    def _limiter_state(
        self, alias: str, concurrency_keys: set[str], rate_keys: set[str]
    ) -> tuple[dict[str, int], dict[str, Bucket]]:
        """After the locks: the running jobs of each concurrency key (expired leases count
        until recovered) and each rate key's bucket, read with the database's now."""
        running: dict[str, int] = {}
        if concurrency_keys:
            rows = (
                Job.objects.using(alias)
                .filter(status=Status.RUNNING, concurrency_key__in=sorted(concurrency_keys))
                .values("concurrency_key")
                .annotate(running=Count("id"))
                .values_list("concurrency_key", "running")
            )
            running = {str(key): int(n) for key, n in rows}
        buckets: dict[str, Bucket] = {}
        if rate_keys:
            limiters = (
                Limiter.objects.using(alias)
                .filter(key__in=[rate_lock(key) for key in sorted(rate_keys)])
                .annotate(db_now=DbNow())
                .values_list("name", "window_start", "started", "db_now")
            )
            buckets = {
                name: Bucket(as_aware(start) if start else None, started, as_aware(now))
                for name, start, started, now in limiters
            }
        return running, buckets

    def _take(self, alias: str, worker_id: str, ids: list[int], lease_seconds: float) -> list[Job]:
        """Lease the chosen jobs (each still waiting and due: the compare-and-set)."""
        # A pause that committed after the candidates were read still holds them back.
        claimed = Job.objects.using(alias).filter(
            not_paused(alias), id__in=ids, status__in=CLAIMABLE, run_at__lte=DbNow()
        )
        start_attempts(claimed, worker_id, lease_seconds)
        return list(
            Job.objects.using(alias).filter(
                id__in=ids, status=Status.RUNNING, lease_owner=worker_id
            )
        )

    def _fill_buckets(self, alias: str, fills: dict[str, Fill]) -> None:
        """Write each rate key's window: start, starts so far, limit, period (seconds).

        ``blocked_until`` (the window's end, once its starts reach the limit) lets the next
        claims leave the key's backlog out of their candidates until then.
        """
        limiters = Limiter.objects.using(alias)
        for name, (start, started, limit, period) in fills.items():
            end = start + dt.timedelta(seconds=period)
            limiters.filter(key=rate_lock(name)).update(
                window_start=start, started=started, blocked_until=end if started >= limit else None
            )
