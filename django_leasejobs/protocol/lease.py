"""Claim and renew: a worker takes due jobs under a lease, then keeps the lease alive.

A claim increments ``attempt``, the fencing token every later write of that run carries. A
renewal that changes no row for a token means the lease was lost (the job was reclaimed or
finished elsewhere): the worker must tell the handler and never write that attempt again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from django.db.models import F

from .. import dialects
from ..db import signals
from ..db.dbtime import DbNow, db_now
from ..db.deadlocks import retry_deadlocks
from ..dialects import Token, after
from ..models import CLAIMABLE, Job, Status
from .base import job_database, logger


@retry_deadlocks
def claim(
    worker_id: str,
    *,
    queues: Sequence[str] | None = None,
    batch: int = 1,
    lease_seconds: float = 60.0,
) -> list[Job]:
    """Lease up to ``batch`` due jobs to ``worker_id``; each claim increments ``attempt``.

    Order: priority (high first), then ``run_at``, then id. ``queues=None`` means every queue.
    Jobs with concurrency or rate limits start only within them
    (``dialects/base/limited.py``); those over a limit stay waiting, unchanged, and the jobs
    behind them are claimed. On PostgreSQL a row this claim read as waiting may be claimed,
    finished and moved to the history by another worker before it is locked: the claim is
    refused (SQLSTATE 40001) and run again at once, like a deadlock's victim.
    """
    if batch < 1 or (queues is not None and not queues):
        return []
    using = job_database()
    jobs = dialects.for_alias(using).claim_limited(using, worker_id, queues, batch, lease_seconds)
    jobs.sort(key=lambda j: (-j.priority, j.run_at, j.pk))
    _started(jobs, worker_id, using)
    return jobs


def _started(jobs: list[Job], worker_id: str, using: str) -> None:
    """Log each claimed job, and send ``job_started`` at commit when someone listens."""
    wanted = signals.wanted(signals.job_started)
    for job in jobs:
        logger.info(
            "job.running id=%s name=%s attempt=%s queue=%s worker=%s",
            job.pk,
            job.name,
            job.attempt,
            job.queue,
            worker_id,
        )
        if wanted:
            signals.send_after_commit(signals.job_started, using, job=job, worker_id=worker_id)


def anything_due(queues: Sequence[str] | None = None) -> bool:
    """Whether a pending or failed job is due in ``queues`` (every queue: None), read without
    a lock (``dialects.oldest_due``: one index probe per queue). Pauses and limits are not
    consulted: a job they hold back counts as due."""
    using = job_database()
    due = dialects.oldest_due(using, db_now(using))
    wanted = due if queues is None else {q: due.get(q) for q in queues}
    return any(at is not None for at in wanted.values())


@retry_deadlocks
def claim_job(
    job_id: int, worker_id: str, *, lease_seconds: float = 60.0, due_only: bool = False
) -> Job | None:
    """Lease one named job, due or not (``None`` if it is not waiting): in-process runners.

    The test helpers (``django_leasejobs.testing``, eager mode) run one chosen job rather than
    the next due one; the write is guarded by status like a claim, so it never takes a job
    that another claimer holds or that has finished. ``due_only``: nor one whose ``run_at``
    is still ahead (eager mode leaves a delayed job waiting).
    """
    using = job_database()
    waiting = Job.objects.using(using).filter(pk=job_id, status__in=CLAIMABLE)
    if due_only:
        waiting = waiting.filter(run_at__lte=DbNow())
    seconds = waiting.values_list("lease_seconds", flat=True).first()
    changed = waiting.update(
        status=Status.RUNNING,
        attempt=F("attempt") + 1,
        lease_owner=worker_id,
        started_at=DbNow(),
        lease_expires_at=after(seconds or lease_seconds),
    )
    if not changed:
        return None
    job = Job.objects.using(using).get(pk=job_id)
    _started([job], worker_id, using)
    return job


class Renewal(NamedTuple):
    """What a heartbeat found: leases lost, and held jobs an operator asked to cancel."""

    lost: set[int]
    cancel_requested: set[int]


def heartbeat(
    worker_id: str, tokens: Iterable[tuple[int, int]], *, lease_seconds: float = 60.0
) -> set[int]:
    """Extend the leases of a worker's in-flight jobs; return the ids whose lease was lost."""
    return renew(worker_id, tokens, lease_seconds=lease_seconds).lost


@retry_deadlocks
def renew(
    worker_id: str, tokens: Iterable[tuple[int, int]], *, lease_seconds: float = 60.0
) -> Renewal:
    """Extend the leases of a worker's in-flight jobs; say which were lost, which to cancel.

    Each row is guarded by (id, attempt), status and owner. A job missing from what the guard
    kept has been reclaimed or finished by someone else. The cancel requests come back from
    the same statement, so the worker learns of one at its next heartbeat on every database.
    """
    held = [Token(*token) for token in tokens]
    if not held:
        return Renewal(set(), set())
    using = job_database()
    renewed = dialects.for_alias(using).renew(using, worker_id, held, lease_seconds)
    lost = {token.id for token in held} - renewed.kept
    for job_id in sorted(lost):
        logger.warning("job.lease_lost id=%s worker=%s", job_id, worker_id)
    return Renewal(lost, renewed.cancel_requested)
