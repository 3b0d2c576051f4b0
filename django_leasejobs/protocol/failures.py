"""Fail, recover and release: an attempt that did not succeed.

A failed attempt is retried after its backoff, or, when its budget is spent (or the error says
retrying is pointless), the job becomes ``dead`` and its dead letter is written in the same
transaction. A lease that expired is a failed attempt too: a job that kills its worker every
time still reaches ``dead``. Every write is guarded by (id, attempt, running).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import F, Q, QuerySet

from ..core import error_history, fingerprints, otel_metrics, registry
from ..core.backoff import Backoff
from ..db import signals
from ..db.dbtime import DbNow, as_aware
from ..db.deadlocks import retry_deadlocks
from ..dialects import after
from ..models import DeadLetter, Job, Status
from ..retries import When
from .base import Failure, Outcome, announce_finished, fenced_outcome, job_database, logger
from .cancels import cancel_attempt, cancelled_fields, send_cancelled_signal
from .workflow_steps import job_ended

_READ = (
    "name",
    "args",
    "kwargs",
    "queue",
    "errors",
    "max_attempts",
    "released",
    "lease_owner",
    "cancel_requested_at",
    "workflow_step_id",
)


@dataclass(frozen=True)
class _FailedAttempt:
    """A failed attempt read under its guard, with the error history it will write."""

    guarded: QuerySet[Job]
    job_id: int
    attempt: int
    row: dict[str, Any]
    errors: list[dict[str, Any]]
    failure: Failure


def fail(
    job_id: int,
    attempt: int,
    failure: Failure,
    *,
    retryable: bool = True,
    backoff: Backoff | None = None,
    when: When | None = None,
) -> Outcome:
    """Record a failed attempt: retry after backoff, or dead-letter when none is left.

    ``when`` (the handler's ``raise Retry(...)``): the retry's time instead of the backoff,
    seconds from the database's now or a moment; the attempt is charged all the same.
    """
    return _fail(job_id, attempt, failure, retryable=retryable, backoff=backoff, when=when)


@retry_deadlocks
def _fail(
    job_id: int,
    attempt: int,
    failure: Failure,
    *,
    retryable: bool,
    backoff: Backoff | None,
    expired_only: bool = False,
    when: When | None = None,
) -> Outcome:
    using = job_database()
    guard = Q(pk=job_id, attempt=attempt, status=Status.RUNNING)
    if expired_only:
        guard &= Q(lease_expires_at__lt=DbNow())
    with transaction.atomic(using=using):
        guarded = Job.objects.using(using).filter(guard)
        row = guarded.annotate(db_now=DbNow()).values(*_READ, "db_now").first()
        if row is None:
            return fenced_outcome(0, "failed", job_id, attempt, Outcome.STALE)
        # Bounded here, the one place a history entry is made: every write below (retry, dead,
        # cancel) and the dead letter store these texts and this list, never the raw ones.
        failure = replace(
            failure,
            error=error_history.stored(failure.error, error_history.ERROR_BYTES),
            traceback=error_history.stored(failure.traceback, error_history.TRACEBACK_BYTES),
        )
        errors = error_history.appended(
            row["errors"],
            {
                "attempt": attempt,
                "worker": row["lease_owner"],
                "at": as_aware(row["db_now"]).isoformat(),
                "kind": failure.kind,
                "error": failure.error,
                "traceback": failure.traceback,
            },
        )
        failed = _FailedAttempt(guarded, job_id, attempt, row, errors, failure)
        if row["cancel_requested_at"] is not None:
            return _cancel(failed)
        charged = attempt - row["released"]
        if not retryable or charged >= row["max_attempts"]:
            return _bury(failed, failure.kind if not retryable else "attempts exhausted")
        if isinstance(when, dt.datetime):  # the handler's own moment, not the database's clock
            delay = max((as_aware(when) - as_aware(row["db_now"])).total_seconds(), 0.0)
            return _retry(failed, delay, run_at=when)
        if when is not None:
            return _retry(failed, when)
        job_function = registry.lookup(row["name"])
        policy = backoff or (
            job_function.get_backoff() if job_function else Backoff.from_settings()
        )
        return _retry(failed, policy.delay(charged))


def _bury(failed: _FailedAttempt, reason: str) -> Outcome:
    """The job becomes dead and its dead letter is written (inside the caller's transaction)."""
    job_id, attempt, row, errors, failure = (
        failed.job_id,
        failed.attempt,
        failed.row,
        failed.errors,
        failed.failure,
    )
    using = failed.guarded.db
    changed = failed.guarded.update(
        status=Status.DEAD,
        finished_at=DbNow(),
        lease_owner="",
        lease_expires_at=None,
        live_dedupe_key=None,
        in_history=True,
        last_error=failure.error,
        errors=errors,
    )
    if not changed:
        return fenced_outcome(0, "dead", job_id, attempt, Outcome.STALE)
    announce_finished(using, [job_id])
    job_ended(using, row["workflow_step_id"], job_id, Status.DEAD)
    dead_letter = DeadLetter.objects.using(using).create(
        job_id=job_id,
        name=row["name"],
        args=row["args"],
        kwargs=row["kwargs"],
        queue=row["queue"],
        reason=reason[:200],
        errors=errors,
        fingerprint=fingerprints.of_error(failure.error, failure.traceback, failure.kind).digest,
    )
    logger.warning(
        "job.dead id=%s name=%s attempt=%s queue=%s reason=%s error=%s",
        job_id,
        row["name"],
        attempt,
        row["queue"],
        reason,
        failure.headline,
    )
    if otel_metrics.available():  # counted once committed, as the signal is sent
        transaction.on_commit(
            partial(otel_metrics.dead_lettered, row["queue"], row["name"]), using=using
        )
    if signals.wanted(signals.job_dead):
        signals.send_after_commit(
            signals.job_dead,
            using,
            job_id=job_id,
            name=row["name"],
            queue=row["queue"],
            attempt=attempt,
            reason=dead_letter.reason,
            error=failure.error,
            dead_letter=dead_letter,
        )
    return Outcome.DEAD


def _cancel(failed: _FailedAttempt) -> Outcome:
    """An operator asked to cancel the job: the attempt that ended is its last (no retry, no
    dead letter), whatever ended it (an error, a timeout, a lost lease)."""
    changed = failed.guarded.update(
        **cancelled_fields(), last_error=failed.failure.error, errors=failed.errors
    )
    if changed:
        announce_finished(failed.guarded.db, [failed.job_id])
        job_ended(
            failed.guarded.db, failed.row["workflow_step_id"], failed.job_id, Status.CANCELLED
        )
        logger.info(
            "job.cancelled id=%s name=%s attempt=%s queue=%s error=%s",
            failed.job_id,
            failed.row["name"],
            failed.attempt,
            failed.row["queue"],
            failed.failure.headline,
        )
        send_cancelled_signal(
            failed.guarded.db,
            failed.job_id,
            failed.row["name"],
            failed.row["queue"],
            failed.attempt,
        )
    return fenced_outcome(changed, "cancelled", failed.job_id, failed.attempt, Outcome.CANCELLED)


def _retry(failed: _FailedAttempt, delay: float, run_at: dt.datetime | None = None) -> Outcome:
    """The job waits ``delay`` seconds of database time (or until ``run_at``, when the handler
    named the moment), then is claimable again."""
    job_id, attempt, row, failure = failed.job_id, failed.attempt, failed.row, failed.failure
    # Guarded on "no cancel request" too: a request that lands after the read above makes this
    # change nothing, and the attempt ends cancelled instead of being retried.
    changed = failed.guarded.filter(cancel_requested_at=None).update(
        status=Status.FAILED,
        run_at=after(delay) if run_at is None else run_at,
        retried_at=DbNow(),
        lease_owner="",
        lease_expires_at=None,
        last_error=failure.error,
        errors=failed.errors,
    )
    if not changed:
        return _cancel(failed)  # STALE when the token no longer owns the job either
    # A timed-out attempt is named so: the worker ended it, the handler raised nothing.
    logger.info(
        "job.%s id=%s name=%s attempt=%s queue=%s error=%s",
        "timeout" if failure.kind == "timeout" else "failed",
        job_id,
        row["name"],
        attempt,
        row["queue"],
        failure.headline,
    )
    if signals.wanted(signals.job_retried):
        signals.send_after_commit(
            signals.job_retried,
            failed.guarded.db,
            job_id=job_id,
            name=row["name"],
            queue=row["queue"],
            attempt=attempt,
            error=failure.error,
            kind=failure.kind,
            delay=delay,
        )
    return Outcome.RETRIED


class Recovered(dict[int, Outcome]):
    """``recover_expired``'s outcomes by job id, and each job's ``names`` (for the runtime
    statistics: a recovered expiry is counted against its job name)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[int, str] = {}


def recover_expired(limit: int = 100) -> Recovered:
    """Take back jobs whose lease expired (their worker died or stalled).

    A reclaim is an attempt: the job goes to ``failed`` with backoff (not straight back to the head
    of the queue), or to ``dead`` when its budget is spent. Each row is guarded by (id, attempt,
    running, lease still expired), so a heartbeat that lands first wins and the job is left
    alone. Any worker may run this.
    """
    expired = list(
        Job.objects.using(job_database())
        .filter(status=Status.RUNNING, lease_expires_at__lt=DbNow())
        .order_by("lease_expires_at")
        .values_list("pk", "attempt", "lease_owner", "name")[:limit]
    )
    outcomes = Recovered()
    for job_id, attempt, owner, name in expired:
        failure = Failure(
            f"Lease expired (worker {owner} stopped renewing it).", kind="lease expired"
        )
        outcomes[job_id] = _fail(
            job_id, attempt, failure, retryable=True, backoff=None, expired_only=True
        )
        outcomes.names[job_id] = name
    return outcomes


@retry_deadlocks
def release(job_id: int, attempt: int) -> Outcome:
    """Hand a claimed job back unspent (graceful shutdown): pending and due now.

    The token still grows on the next claim; ``released`` makes the attempt free of charge. A
    job an operator asked to cancel is not handed back: it ends cancelled.
    """
    changed = (
        Job.objects.using(job_database())
        .filter(pk=job_id, attempt=attempt, status=Status.RUNNING, cancel_requested_at=None)
        .update(
            status=Status.PENDING,
            run_at=DbNow(),
            released=F("released") + 1,
            lease_owner="",
            lease_expires_at=None,
        )
    )
    if not changed:
        return cancel_attempt(job_id, attempt)  # STALE too when the token is spent
    return fenced_outcome(changed, "released", job_id, attempt, Outcome.RELEASED)
