"""The claim and the lease's renewal, with the ORM: the steps of ``Dialect.claim_limited`` and
``Dialect.renew``, which every dialect inherits through :class:`~.dialect.Dialect`.

The plain claim (``_claim``) locks only the candidates it read, page by page (``CLAIM_PAGES``);
the claim with limits (``claim_limited``) runs the steps of :mod:`.limited` and fills the
batch's rest with the plain claim (``_claim_rest``). A database overrides a step or the whole
operation (PostgreSQL: :mod:`..postgresql.dialect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import transaction

from ...db.dbtime import DbNow
from ...models import CLAIMABLE, Job, Status
from ..tokens import Token, tokens_q
from .expressions import after, start_attempts
from .limited import ORDER, UNLIMITED, LimitedClaimSteps
from .pauses import not_paused
from .within_limits import CANDIDATES_PER_SLOT, Held, limiter_keys

__all__ = ["CLAIM_PAGES", "LeaseSteps", "Renewed"]


class Renewed(NamedTuple):
    """What a renewal found: the leases kept, and which of those jobs an operator asked to cancel.

    The cancel requests ride on the heartbeat's own statement, so a worker learns of one within
    a heartbeat interval on every database at no extra round trip.
    """

    kept: set[int]
    cancel_requested: set[int]


CLAIM_PAGES = 4
"""Candidate pages a locking claim tries when other claimers hold the first ones."""


class LeaseSteps(LimitedClaimSteps):
    """Claim and renew: the ORM's ways, for :class:`~.dialect.Dialect`."""

    def _claim(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
    ) -> list[Job]:
        """Lease up to ``batch`` due rows without limits to ``worker_id``, ``attempt`` + 1 each.

        InnoDB locks every row a locking read *reads*, and ``ORDER BY ... LIMIT`` reads the
        whole due backlog into a sort first: one ``SELECT ... FOR UPDATE SKIP LOCKED`` would
        lock it all and leave other claimers nothing. So the order comes from a plain read
        of candidate ids, and the locking read names those ids with no ORDER BY or LIMIT, so
        it locks only them (rows another claimer holds are skipped). A page taken entirely
        by others moves on to the next, a few times at most. The update re-checks the status.
        """
        due = Job.objects.using(alias).filter(UNLIMITED, status__in=CLAIMABLE, run_at__lte=DbNow())
        if queues is not None:
            due = due.filter(queue__in=list(queues))
        due = due.filter(not_paused(alias))
        with transaction.atomic(using=alias):
            ids = self._lock_candidates(due, batch)
            if not ids:
                return []
            # The pause test again in the UPDATE that starts the jobs: a pause that committed
            # after the candidates were read still holds them back.
            claimed = Job.objects.using(alias).filter(
                not_paused(alias), id__in=ids, status__in=CLAIMABLE
            )
            start_attempts(claimed, worker_id, lease_seconds)
            return list(
                Job.objects.using(alias).filter(
                    id__in=ids, status=Status.RUNNING, lease_owner=worker_id
                )
            )

    @staticmethod
    def _lock_candidates(due: Any, batch: int) -> list[int]:
        ids: list[int] = []
        seen: list[int] = []
        for _ in range(CLAIM_PAGES):
            candidates = list(
                due.exclude(id__in=seen)
                .order_by(*ORDER)
                .values_list("id", flat=True)[: batch - len(ids)]
            )
            if not candidates:
                break
            seen.extend(candidates)
            ids.extend(
                due.filter(id__in=candidates)
                .order_by()  # no ORDER BY: nothing to sort, so only the candidates are read
                .select_for_update(skip_locked=True)
                .values_list("id", flat=True)
            )
            if len(ids) >= batch:
                break
        return ids

    def claim_limited(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
    ) -> list[Job]:
        """Lease up to ``batch`` due jobs, those with concurrency or rate limits only within
        their limits, those without beside them in one claim order (``base.limited``).

        Jobs over a limit stay waiting, unchanged, and the jobs behind them are claimed. With
        no job with limits due, this is the plain claim (``_claim``).
        """
        if not self._limited_due(alias, queues, batch):
            return self._claim(alias, worker_id, queues, batch, lease_seconds)
        candidates = self._limited_candidates(alias, queues, batch * CANDIDATES_PER_SLOT)
        if not candidates:  # all of them held back by their limits
            return self._claim(alias, worker_id, queues, batch, lease_seconds)
        heads = self._unlimited_heads(alias, queues, batch)
        keys = limiter_keys(candidates)
        self._add_limiters(alias, keys)
        with transaction.atomic(using=alias):
            held = Held(candidates, heads, self._lock_limiters(alias, keys))
            jobs = self._start_within_limits(alias, worker_id, held, batch, lease_seconds)
        return self._claim_rest(alias, worker_id, queues, batch, lease_seconds, held, jobs)

    def _claim_rest(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
        held: Held,
        jobs: list[Job],
    ) -> list[Job]:
        """After the limited claim's transaction: the batch's rest with the plain claim, when
        jobs without limits were due before it filled."""
        rest = batch - len(jobs)
        if rest > 0 and held.heads:
            jobs += self._claim(alias, worker_id, queues, rest, lease_seconds)
        return jobs

    def renew(
        self, alias: str, worker_id: str, tokens: list[Token], lease_seconds: float
    ) -> Renewed:
        """Extend the leases ``tokens`` still hold; return the ids kept and those of them with
        a cancel request."""
        jobs = Job.objects.using(alias)
        leases = dict(
            jobs.filter(pk__in=[job_id for job_id, _ in tokens]).values_list("pk", "lease_seconds")
        )
        by_lease: dict[float, list[Token]] = {}
        for token in tokens:
            by_lease.setdefault(leases.get(token.id) or lease_seconds, []).append(token)
        held = {"status": Status.RUNNING, "lease_owner": worker_id}
        for seconds, group in by_lease.items():
            jobs.filter(tokens_q(group), **held).update(lease_expires_at=after(seconds))
        rows = jobs.filter(tokens_q(tokens), **held).values_list("pk", "cancel_requested_at")
        kept: set[int] = set()
        cancel: set[int] = set()
        for job_id, requested in rows:
            kept.add(job_id)
            if requested is not None:
                cancel.add(job_id)
        return Renewed(kept, cancel)
