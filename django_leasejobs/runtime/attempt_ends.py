"""How an attempt ends, once it ran (or could not): one fenced write through the protocol.

``write_result`` turns an :class:`~.execution.Execution` into its write (complete, defer,
snooze, fail), the handler's last progress update first (``flush_progress``); ``end_attempt``
ends an attempt under a handler the worker cannot stop (a timeout, a cancel); ``finished`` and
``recovered`` send a ``django.tasks`` task's final signal after a grouped completion or a lease
recovery. Running the handler is :mod:`.execution`'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .. import protocol
from ..core import registry, task_rows
from ..core.backoff import Backoff
from ..core.conf import settings
from ..models import Job
from ..protocol import Failure, Outcome
from . import job_logs, telemetry
from .context import CANCELLED

if TYPE_CHECKING:
    from .execution import Execution

logger = logging.getLogger("django_leasejobs")


def flush_progress(execution: Execution) -> None:
    """Write the handler's last progress update before its attempt's end is: then a reader
    who sees the job finished sees its last update too. Not for an attempt that already
    ended (lease lost, ended by the worker, completed by the handler): it would change
    nothing."""
    context = execution.context
    if not (context.completed or context.lease_lost or context.cancelled):
        context.flush_progress()
        telemetry.kept(execution)


def write_result(execution: Execution) -> Outcome:
    """Write the execution's result, guarded by its attempt token (its last progress
    update first, its logs after: :mod:`.job_logs`)."""
    outcome = _write_result(execution)
    job_logs.keep([(execution, outcome)])
    return outcome


def _write_result(execution: Execution) -> Outcome:
    """``write_result``'s write of the attempt's end."""
    flush_progress(execution)
    job, context = execution.job, execution.context
    if context.completed:
        return Outcome.SUCCEEDED
    if context.lease_lost:
        logger.warning("job.stale id=%s attempt=%s action=report (lease lost)", job.pk, job.attempt)
        return Outcome.STALE
    if context.cancelled:
        # The worker already ended this attempt (``end_attempt``, which logged it): its token
        # is spent. A handler that saw ``ctx.cancelled`` and returned is not an error.
        logger.debug(
            "job.returned id=%s attempt=%s (attempt ended: %s; its result is not written)",
            job.pk,
            job.attempt,
            context.cancel_reason,
        )
        return Outcome.STALE
    if execution.ok:
        outcome = protocol.complete(
            job.pk,
            job.attempt,
            execution.result,
            finished_by=context.worker_id,
            upgraded=execution.upgraded,
        )
    elif execution.unknown:
        assert execution.failure is not None
        outcome = protocol.defer(
            job.pk,
            job.attempt,
            execution.failure,
            deferrals=job.deferrals,
            grace=settings.UNKNOWN_JOB_GRACE,
            worker_id=context.worker_id,
            reason=execution.unknown,
        )
    elif execution.snoozed:
        assert execution.when is not None
        assert execution.failure is not None
        outcome = protocol.snooze(
            job.pk,
            job.attempt,
            execution.when,
            max_snoozes=settings.MAX_SNOOZES,
            traceback=execution.failure.traceback,
        )
    else:
        assert execution.failure is not None
        outcome = protocol.fail(
            job.pk,
            job.attempt,
            execution.failure,
            retryable=execution.retryable,
            backoff=execution.backoff or _backoff(job, execution),
            when=execution.when,
        )
    task_rows.handler().finished(execution, outcome)  # task_finished, for a task at a final state
    telemetry.refused(execution, outcome)
    return outcome


def _backoff(job: Job, execution: Execution | None) -> Backoff | None:
    """A job's own backoff; a ``django.tasks`` task's, else its backend's ``OPTIONS``."""
    job_function = registry.lookup(job.name)
    if job_function is not None:
        return job_function.get_backoff()
    return task_rows.handler().backoff(execution) if execution is not None else None


def end_attempt(
    job: Job, reason: str, execution: Execution | None = None, timeout: float | None = None
) -> Outcome:
    """End a running attempt under its handler, which the worker cannot stop: one fenced write.

    ``reason`` ``"timeout"`` fails the attempt with an error of kind ``timeout`` (retried by the
    job's backoff, dead-lettered when none is left); ``"cancelled"`` ends it cancelled, as the
    operator asked. The handler's own result is then refused (``write_result``).
    """
    if reason == CANCELLED:
        outcome = protocol.cancel_attempt(job.pk, job.attempt)
    else:
        failure = Failure(
            f"TimeoutError: the handler ran longer than its timeout of {timeout or 0:g} s.",
            kind="timeout",
        )
        outcome = protocol.fail(job.pk, job.attempt, failure, backoff=_backoff(job, execution))
    if execution is not None:
        task_rows.handler().finished(execution, outcome)
    return outcome


def finished(execution: Execution, outcome: Outcome) -> None:
    """``task_finished`` for a ``django.tasks`` task whose grouped completion was written."""
    task_rows.handler().finished(execution, outcome)


def recovered(outcomes: dict[int, Outcome]) -> None:
    """After ``protocol.recover_expired()``: ``task_finished`` for tasks it dead-lettered.

    Recovery runs no handler code, so this is the only place a ``django.tasks`` task whose last
    worker died reaches its final signal. Native jobs need nothing here.
    """
    task_rows.handler().recovered(outcomes)
