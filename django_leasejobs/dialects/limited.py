"""The steps of a claim of jobs with limits, written with the ORM (every database).

``protocol.limited_claim`` runs them in order; a dialect overrides those its database does
differently (SQLite takes its write lock first; PostgreSQL reads and locks in one statement).
Here the candidates are read before the claim's transaction (``read_limited``), where the
limiter rows of their keys are created too: a row lock needs a row, and creating one inside the
transaction could make a claimer wait on another's. They are hints. What makes the limits hold
is ``hold_limited`` (one claimer at a time per key) followed by ``limiter_state`` read *after*
the locks, in the same transaction as the claim.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from django.db import transaction
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from ..dbtime import DbNow, as_aware
from ..models import CLAIMABLE, IS_WAITING, Job, Limiter, Status
from .pauses import not_paused

LIMITED = Q(concurrency_key__isnull=False) | Q(rate_key__isnull=False)
"""Jobs with a limit: ``leasejobs_limited`` holds them, ``leasejobs_claimable`` the rest."""

UNLIMITED = Q(concurrency_key__isnull=True, rate_key__isnull=True)

ORDER = ("-priority", "run_at", "id")


class Candidate(NamedTuple):
    """A due job with limits, as the hint read saw it."""

    id: int
    priority: int
    run_at: dt.datetime
    queue: str
    concurrency_key: str | None
    concurrency_limit: int | None
    rate_key: str | None
    rate_limit: int | None
    rate_period: int | None


class Head(NamedTuple):
    """A due job without limits: only its place in the claim order matters."""

    id: int
    priority: int
    run_at: dt.datetime


class Held(NamedTuple):
    """What a claim holds before it counts: the candidates, the heads of the jobs without
    limits, and the limiter keys (``c:``/``r:``) it locked."""

    candidates: list[Candidate]
    heads: list[Head]
    locked: set[str]


class Bucket(NamedTuple):
    """A rate key's window as its locked limiter row says, and the database's now."""

    window_start: dt.datetime | None
    started: int
    now: dt.datetime


def concurrency_lock(key: str) -> str:
    return "c:" + key


def rate_lock(key: str) -> str:
    return "r:" + key


def limiter_keys(candidates: Iterable[Candidate]) -> list[str]:
    """The limiter keys of ``candidates``, in the order claimers lock them."""
    keys = {concurrency_lock(c.concurrency_key) for c in candidates if c.concurrency_key}
    keys |= {rate_lock(c.rate_key) for c in candidates if c.rate_key}
    return sorted(keys)


def _due(alias: str, queues: Sequence[str] | None, kind: Q) -> QuerySet[Job]:
    due = Job.objects.using(alias).filter(IS_WAITING, kind, not_paused(alias), run_at__lte=DbNow())
    if queues is not None:
        due = due.filter(queue__in=list(queues))
    return due


class LimitedClaims:
    """The ORM's way of each step of a limited claim."""

    def limited_due(self, alias: str, queues: Sequence[str] | None, batch: int) -> bool:
        """Whether a job with limits is among the first ``batch`` due jobs in claim order.
        When none is, the claim is today's claim: the limited claim would take the same jobs.

        Read in claim order, as the claim reads. Without an index of their own for jobs with
        limits (MySQL has no partial indexes), asking whether *any* is due read the whole due
        backlog on every claim. A dialect with such an index may answer for any due job."""
        head = _due(alias, queues, Q()).order_by(*ORDER)[:batch]
        return any(c or r for c, r in head.values_list("concurrency_key", "rate_key"))

    def read_limited(
        self, alias: str, queues: Sequence[str] | None, count: int, batch: int
    ) -> Held | None:
        """Before the claim's transaction: the candidates and heads, and the limiter rows of
        their keys created (nothing locked yet)."""
        candidates = self.limited_candidates(alias, queues, count)
        if not candidates:
            return Held([], [], set())
        heads = self.unlimited_heads(alias, queues, batch)
        self.add_limiters(alias, limiter_keys(candidates))
        return Held(candidates, heads, set())

    def hold_limited(
        self, alias: str, queues: Sequence[str] | None, count: int, batch: int, first: Held | None
    ) -> Held:
        """In the claim's transaction: lock the keys of the candidates ``read_limited`` found."""
        if first is None:
            raise RuntimeError("read_limited reads the candidates on this database")
        return first._replace(locked=self.lock_limiters(alias, limiter_keys(first.candidates)))

    def limiter_state(
        self, alias: str, concurrency_keys: set[str], rate_keys: set[str]
    ) -> tuple[dict[str, int], dict[str, Bucket]]:
        """After the locks: the running jobs of each concurrency key and each rate bucket."""
        running = self.running_counts(alias, concurrency_keys) if concurrency_keys else {}
        buckets = self.buckets(alias, rate_keys) if rate_keys else {}
        return running, buckets

    def limited_candidates(
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

    def unlimited_heads(self, alias: str, queues: Sequence[str] | None, count: int) -> list[Head]:
        """The claim order of the first ``count`` due jobs without limits."""
        due = _due(alias, queues, UNLIMITED).order_by(*ORDER)
        return [Head(*row) for row in due.values_list(*Head._fields)[:count]]

    def add_limiters(self, alias: str, keys: Iterable[str]) -> None:
        """Create the limiter rows of ``keys`` that do not exist yet (outside the claim)."""
        wanted = set(keys)
        limiters = Limiter.objects.using(alias)
        missing = wanted - set(limiters.filter(key__in=wanted).values_list("key", flat=True))
        rows = [Limiter(key=key, name=key[2:]) for key in sorted(missing)]
        if rows:
            # A racing claimer may create them first: nothing to do then.
            limiters.bulk_create(rows, ignore_conflicts=True)

    def lock_limiters(self, alias: str, keys: Iterable[str]) -> set[str]:
        """Lock ``keys`` until the transaction ends (here: their limiter rows); return those
        locked.

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

    def running_counts(self, alias: str, keys: Iterable[str]) -> dict[str, int]:
        """How many jobs of each concurrency key run now (expired leases count until
        recovered)."""
        rows = (
            Job.objects.using(alias)
            .filter(status=Status.RUNNING, concurrency_key__in=list(keys))
            .values("concurrency_key")
            .annotate(running=Count("id"))
            .values_list("concurrency_key", "running")
        )
        return {str(key): int(running) for key, running in rows}

    def buckets(self, alias: str, keys: Iterable[str]) -> dict[str, Bucket]:
        """The locked limiter rows of rate ``keys``, read with the database's now."""
        rows = (
            Limiter.objects.using(alias)
            .filter(key__in=[rate_lock(key) for key in keys])
            .annotate(db_now=DbNow())
            .values_list("name", "window_start", "started", "db_now")
        )
        return {
            name: Bucket(as_aware(start) if start else None, started, as_aware(now))
            for name, start, started, now in rows
        }

    def fill_buckets(self, alias: str, fills: dict[str, tuple[dt.datetime, int, int, int]]) -> None:
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

    def take(self, alias: str, worker_id: str, ids: list[int], lease_seconds: float) -> list[Job]:
        """Lease the chosen jobs (each still waiting and due: the compare-and-set)."""
        # A pause that committed after the candidates were read still holds them back.
        claimed = Job.objects.using(alias).filter(
            not_paused(alias), id__in=ids, status__in=CLAIMABLE, run_at__lte=DbNow()
        )
        running = {
            "status": Status.RUNNING,
            "attempt": F("attempt") + 1,
            "lease_owner": worker_id,
            "started_at": DbNow(),
        }
        from .base import after  # base imports this module

        with transaction.atomic(using=alias):
            custom = list(claimed.exclude(lease_seconds=None).values_list("id", "lease_seconds"))
            for job_id, seconds in custom:
                claimed.filter(id=job_id).update(
                    **running, lease_expires_at=after(seconds or lease_seconds)
                )
            claimed.filter(lease_seconds=None).update(
                **running, lease_expires_at=after(lease_seconds)
            )
        return list(
            Job.objects.using(alias).filter(
                id__in=ids, status=Status.RUNNING, lease_owner=worker_id
            )
        )

    def begin_limited(self, alias: str) -> None:
        """First statement of a limited claim's transaction (where a database needs one)."""
