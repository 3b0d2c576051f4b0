"""Django signals sent on each state change of a job, for metrics, audit logs and alerts.

Every signal is sent with ``sender=Job`` (the model class) **after the change is committed**:
right away when no transaction is open (the worker's case), at the commit of the caller's
transaction otherwise, and never for a change that was rolled back. A receiver's exception is
logged and never reaches the worker or the caller. When a signal has no receivers, nothing is
computed or queried for it: the hot path pays one attribute check.

Arguments (all keyword):

``job_enqueued(job)``
    A job was inserted (by ``enqueue``, ``enqueue_many``, a replay or a schedule's occurrence).
    ``job`` is the new ``Job``.
    A dedupe hit that returned an existing job sends nothing.
``job_started(job, worker_id)``
    A worker claimed the job; ``job.attempt`` is the new attempt (the fencing token).
``job_succeeded(job_id, name, queue, attempt, result)``
    The attempt completed under its token (stale completions send nothing).
``job_retried(job_id, name, queue, attempt, error, kind, delay)``
    The attempt failed (or its lease expired, ``kind="lease expired"``) and a retry is
    scheduled ``delay`` seconds later.
``job_dead(job_id, name, queue, attempt, reason, error, dead_letter)``
    No attempt is left or the error is permanent; ``dead_letter`` is the new ``DeadLetter``.
``job_cancelled(job_id, name, queue, attempt)``
    The job ended cancelled, once: an operator cancelled it before it ran, or its worker ended
    a running attempt an operator asked to cancel (the handler's cooperative end sends nothing
    more). ``attempt`` is the last attempt (0 if it never ran).

Three more are the worker's measurements, sent at once from the worker's threads (they change
no row, so there is no commit to wait for), for the Prometheus exporter and a project's own:

``job_processed(job_id, name, queue, attempt, outcome, seconds, error_type)``
    An attempt's handler ended: ``outcome`` is ``succeeded``, ``failed``, ``snoozed`` or
    ``deferred`` (what the handler did; its write may still be refused), ``seconds`` how long
    it ran, ``error_type`` the exception's class for a failure (else ``""``).
``jobs_claimed(worker_id, queues, size, seconds)``
    A worker's claim took ``size`` jobs (0 too) in ``seconds``; ``queues`` is what it claimed
    from (``"*"``: every queue).
``lease_lost(job_id, name, queue, attempt, detected_by)``
    A worker learnt it no longer holds the job's lease: ``detected_by`` is ``heartbeat`` (a
    renewal found no row) or ``write`` (a guarded write of the attempt was refused as stale).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger("django_leasejobs")

job_enqueued = Signal(use_caching=True)
job_started = Signal(use_caching=True)
job_succeeded = Signal(use_caching=True)
job_retried = Signal(use_caching=True)
job_dead = Signal(use_caching=True)
job_cancelled = Signal(use_caching=True)
job_processed = Signal(use_caching=True)
jobs_claimed = Signal(use_caching=True)
lease_lost = Signal(use_caching=True)


def wanted(signal: Signal) -> bool:
    """True when someone listens: check before building a signal's arguments (no query, no
    import, one list test, so a worker with no receivers pays nothing more)."""
    return bool(signal.receivers)


def send_now(signal: Signal, **kwargs: Any) -> None:
    """Send ``signal`` with ``sender=Job``; a receiver's exception is logged, never raised."""
    from ..models import Job

    for receiver, response in signal.send_robust(sender=Job, **kwargs):
        if isinstance(response, Exception):
            logger.error(
                "signal receiver %r failed: %r",
                receiver,
                response,
                exc_info=(type(response), response, response.__traceback__),
            )


def send_after_commit(signal: Signal, using: str, **kwargs: Any) -> None:
    """Send ``signal`` once the current transaction on ``using`` commits (at once if none)."""
    transaction.on_commit(functools.partial(send_now, signal, **kwargs), using=using)
