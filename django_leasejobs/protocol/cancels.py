"""Cancel: at once for a job that has not started, by request for a running one.

A running job belongs to its worker: only the attempt's own token may end it, so an operator
cannot write ``cancelled`` over it. ``request_cancel`` records the wish on the row
(``cancel_requested_at``); the owning worker reads it back with its next heartbeat (at once
through NOTIFY on PostgreSQL) and ends the attempt with ``cancel_attempt``, guarded by (id,
attempt, running, requested). A completion racing it is guarded by (id, attempt, running):
whichever lands first wins and the other changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q

from .. import dialects
from ..db import signals
from ..db.dbtime import DbNow
from ..db.deadlocks import retry_deadlocks
from ..models import CLAIMABLE, FINAL, Job, Status
from .base import Outcome, announce_finished, fenced_outcome, job_database, logger
from .workflow_steps import job_ended


class Cancel(enum.Enum):
    """What ``request_cancel`` did."""

    CANCELLED = "cancelled"
    """The job had not started (pending, or failed and waiting): it is cancelled now."""
    REQUESTED = "requested"
    """The job is running: the request is recorded and its worker will end the attempt."""
    REFUSED = "refused"
    """The job is finished (or does not exist): nothing changed."""


def cancelled_fields() -> dict[str, object]:
    """What a cancelled job's row holds: finished, no lease, its dedupe key free again."""
    return {
        "status": Status.CANCELLED,
        "finished_at": DbNow(),
        "lease_owner": "",
        "lease_expires_at": None,
        "live_dedupe_key": None,
        "in_history": True,
    }


@retry_deadlocks
def request_cancel(job_id: int) -> Cancel:
    """Cancel a waiting job now, or ask a running job's worker to cancel it.

    Each statement is guarded by the states it is allowed from. A job can move between them
    (a claim, a failed attempt, a lease recovery), so the pair is tried again while the job is
    still live; a repeated request for a running job keeps the first request's time. Racing a
    lease recovery of the same job, InnoDB may pick the request as a deadlock victim: each
    statement is its own transaction, so the request is simply made again.
    """
    using = job_database()
    jobs = Job.objects.using(using)
    for _ in range(_TRIES):
        # One transaction: the announcement to waiting callers commits with the row.
        with transaction.atomic(using=using):
            cancelled = jobs.filter(pk=job_id, status__in=CLAIMABLE).update(**cancelled_fields())
            if cancelled:
                announce_finished(using, [job_id])
                _step_cancelled(using, job_id)
        if cancelled:
            _cancelled(using, job_id)
            return Cancel.CANCELLED
        running = jobs.filter(pk=job_id, status=Status.RUNNING)
        if running.filter(cancel_requested_at=None).update(cancel_requested_at=DbNow()):
            dialects.for_alias(using).announce_cancel(using, job_id)
            logger.info("job.cancel_requested id=%s", job_id)
            return Cancel.REQUESTED
        status = jobs.filter(pk=job_id).values_list("status", "cancel_requested_at").first()
        if status is None or status[0] in FINAL:
            return Cancel.REFUSED
        if status[0] == Status.RUNNING and status[1] is not None:
            return Cancel.REQUESTED  # asked before; its worker has not ended it yet
    return Cancel.REFUSED


_TRIES = 5
"""Rounds before giving up on a job that keeps changing state under the request (each round
is two guarded statements and a read); a refusal then says the job was not cancellable."""


def cancel(job_id: int) -> bool:
    """Cancel a job: True if it is cancelled now or, running, its worker was asked to.

    Kept as it always was for waiting jobs (pending, or failed and waiting for a retry). Use
    ``request_cancel`` to tell the two apart.
    """
    return request_cancel(job_id) is not Cancel.REFUSED


@retry_deadlocks
def cancel_attempt(job_id: int, attempt: int) -> Outcome:
    """End a running attempt as cancelled, with its token, because an operator asked to.

    Guarded by (id, attempt, running, cancel requested): a stale token, a job already
    completed or failed, or one nobody asked to cancel changes nothing (``Outcome.STALE``).
    """
    guard = Q(pk=job_id, attempt=attempt, status=Status.RUNNING, cancel_requested_at__isnull=False)
    using = job_database()
    with transaction.atomic(using=using):  # the announcement commits with the row
        changed = Job.objects.using(using).filter(guard).update(**cancelled_fields())
        if changed:
            announce_finished(using, [job_id])
            _step_cancelled(using, job_id)
    if changed:
        _cancelled(using, job_id)
    return fenced_outcome(changed, "cancelled", job_id, attempt, Outcome.CANCELLED)


@dataclass
class CancelMany:
    """What ``cancel_many`` did with each id it was given."""

    cancelled: list[int] = field(default_factory=list)
    """Waiting jobs (pending, or failed and waiting) cancelled now."""
    requested: list[int] = field(default_factory=list)
    """Running jobs whose worker was asked to end them."""
    left: list[int] = field(default_factory=list)
    """Finished, gone, or running and asked before: nothing changed."""


@retry_deadlocks
def cancel_many(job_ids: Sequence[int]) -> CancelMany:
    """``request_cancel`` for a batch of jobs (an operator's bulk cancel), in one transaction.

    The rows are locked first, in id order, so each one's state is known while the two guarded
    UPDATEs (the waiting ones cancelled, the running ones asked) run: the result names exactly
    what changed. A claim does not wait for these locks: it passes over locked rows (SKIP
    LOCKED) and takes others, so a bulk cancel stops no worker; keep the batch small (the
    caller's keyed walk) so the locks are short. A deadlock victim is run again whole.
    """
    using = job_database()
    jobs = Job.objects.using(using)
    result = CancelMany()
    with transaction.atomic(using=using):
        rows = list(
            jobs.filter(pk__in=list(job_ids))
            .order_by("pk")
            .select_for_update()
            .values_list("pk", "status", "cancel_requested_at", "workflow_step_id")
        )
        steps = {pk: step for pk, _, _, step in rows if step is not None}
        for pk, status, requested_at, _ in rows:
            if status in CLAIMABLE:
                result.cancelled.append(pk)
            elif status == Status.RUNNING and requested_at is None:
                result.requested.append(pk)
        # Guarded all the same, as every operator write is; the locks make the guards hold.
        if result.cancelled:
            jobs.filter(pk__in=result.cancelled, status__in=CLAIMABLE).update(**cancelled_fields())
        if result.requested:
            jobs.filter(
                pk__in=result.requested, status=Status.RUNNING, cancel_requested_at=None
            ).update(cancel_requested_at=DbNow())
        if result.cancelled:
            announce_finished(using, result.cancelled)
        for pk in result.cancelled:
            if pk in steps:
                job_ended(using, steps[pk], pk, Status.CANCELLED)
    done = set(result.cancelled) | set(result.requested)
    result.left = [pk for pk in job_ids if pk not in done]
    for pk in result.requested:
        dialects.for_alias(using).announce_cancel(using, pk)
    if result.cancelled and signals.wanted(signals.job_cancelled):
        for pk, name, queue, attempt in jobs.filter(pk__in=result.cancelled).values_list(
            "pk", "name", "queue", "attempt"
        ):
            send_cancelled_signal(using, pk, name, queue, attempt)
    if done:
        logger.info(
            "job.cancelled_many cancelled=%s requested=%s first_id=%s last_id=%s",
            len(result.cancelled),
            len(result.requested),
            min(done),
            max(done),
        )
    return result


def _step_cancelled(using: str, job_id: int) -> None:
    """A workflow's job just cancelled: its step, in the same transaction (one row read)."""
    step_id = Job.objects.using(using).filter(pk=job_id).values_list("workflow_step_id").get()[0]
    job_ended(using, step_id, job_id, Status.CANCELLED)


def _cancelled(using: str, job_id: int) -> None:
    """The one line and the ``job_cancelled`` signal of a job just cancelled by its id.

    The row is final now, so reading its name and queue back cannot race another change; a
    cancel is rare, and this read is one row by its key.
    """
    row = Job.objects.using(using).filter(pk=job_id).values_list("name", "queue", "attempt").first()
    if row is None:  # pruned in between: nothing to name
        return
    name, queue, attempt = row
    logger.info("job.cancelled id=%s name=%s attempt=%s queue=%s", job_id, name, attempt, queue)
    send_cancelled_signal(using, job_id, name, queue, attempt)


def send_cancelled_signal(using: str, job_id: int, name: str, queue: str, attempt: int) -> None:
    """``job_cancelled`` at commit, when someone listens (a Django signal, not a NOTIFY)."""
    if signals.wanted(signals.job_cancelled):
        signals.send_after_commit(
            signals.job_cancelled,
            using,
            job_id=job_id,
            name=name,
            queue=queue,
            attempt=attempt,
        )
