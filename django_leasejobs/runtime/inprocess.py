"""Run one chosen job in the caller's process and thread: eager mode and the test helpers.

A burst ``Worker`` runs handlers on pool threads with connections of their own, which cannot
see a test's uncommitted rows; these run in the caller's thread and connection instead, through
the same claim, ``execution`` and result writing as a worker, so retries and dead letters
behave alike.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from django.db import transaction

from .. import protocol
from ..core.conf import settings
from ..errors import JobFailedError
from ..models import Job, Status
from ..models.databases import using_database
from ..protocol import Outcome
from .attempt_ends import write_result
from .execution import Execution, execute


def worker_id() -> str:
    """The ``finished_by`` / ``lease_owner`` of jobs run in-process: says where they ran."""
    return f"in-process-{os.getpid()}"


def run_claimed(job: Job) -> tuple[Execution, Outcome]:
    """Execute a job this process has claimed and write its result under its token."""
    execution = execute(job, worker_id())
    return execution, write_result(execution)


def run_one(job_id: int, *, due_only: bool = False) -> tuple[Execution, Outcome] | None:
    """Claim the job ``job_id`` (due or not, or only due) and run it; ``None`` if it was not
    waiting (or not due)."""
    job = protocol.claim_job(
        job_id, worker_id(), lease_seconds=settings.LEASE_SECONDS, due_only=due_only
    )
    if job is None:
        return None
    return run_claimed(job)


def raise_failure(execution: Execution, *, rescheduled: bool = True) -> None:
    """Raise what the handler raised (or ``JobFailedError``) if the attempt failed.

    ``rescheduled=False``: a ``Retry`` or ``Snooze`` is not raised (the job waits for its time).
    """
    if execution.ok or execution.context.completed:
        return
    if not rescheduled and execution.when is not None:
        return
    if execution.exception is not None:
        raise execution.exception
    assert execution.failure is not None
    job = execution.job
    status = Job.objects.using(job._state.db).filter(pk=job.pk).values_list("status", flat=True)
    raise JobFailedError(
        f"Job {job.pk} ({job.name}) failed: {execution.failure.error}",
        job_id=job.pk,
        name=job.name,
        status=status.first() or "",
        error=execution.failure.error,
    )


def run_eagerly(job_id: int, *, rescheduled: bool = True) -> Any:
    """Run one job now and return its result; its error (after it is recorded) raises.

    ``rescheduled=False`` (eager mode): a job not due yet (``delay``, ``run_at``) is left
    waiting; a handler's ``Retry`` or ``Snooze`` is recorded, not raised: it is the handler's
    plan, not an error of the code that enqueued the job; any other error raises
    ``JobFailedError`` saying what became of the job, from the handler's error.
    """
    ran = run_one(job_id, due_only=not rescheduled)
    if ran is None:
        return None
    execution, _ = ran
    if rescheduled:
        raise_failure(execution)
        return execution.result
    try:
        raise_failure(execution, rescheduled=False)
    except Exception as exc:
        raise _eager_failure(execution.job, exc) from exc
    return execution.result


def _eager_failure(job: Job, exc: Exception) -> JobFailedError:
    """What an eager job's failure raises: which job, which attempt, and what became of it
    (a test would otherwise see a bare error, not knowing that a retry waits)."""
    row = Job.objects.using(job._state.db).get(pk=job.pk)
    error = f"{type(exc).__name__}: {exc}"
    attempt = f"attempt {row.attempt} of {row.max_attempts}"
    if row.status == Status.DEAD:
        fate = "it is dead (a dead letter was written)"
    else:
        fate = (
            f"its retry waits until {row.run_at.isoformat()} "
            "(testing.drain(with_scheduled=True) runs it now)"
        )
    return JobFailedError(
        f"LEASEJOBS_EAGER: job {job.pk} ({job.name}) failed on {attempt}: {error}; {fate}.",
        job_id=job.pk,
        name=job.name,
        status=row.status,
        error=error,
    )


def enqueued(jobs: Job | list[Job]) -> None:
    """With ``LEASEJOBS_EAGER``: run each new job when the surrounding transaction commits.

    ``on_commit`` runs at once outside a transaction; the callback is not robust, so a
    handler's error propagates out of the commit into the test, as ``JobFailedError``. A
    ``Retry`` or ``Snooze`` does not: the job waits for the time it gave, and
    ``testing.drain()`` runs it then; so does a job enqueued with a ``delay`` or ``run_at``
    ahead.
    """
    if not settings.EAGER:
        return
    for job in jobs if isinstance(jobs, list) else [jobs]:
        using = job._state.db or protocol.job_database()  # shards: the job's own database
        transaction.on_commit(functools.partial(_run_eagerly_in, using, job.pk), using=using)


def _run_eagerly_in(using: str, job_id: int) -> None:
    with using_database(using):
        run_eagerly(job_id, rescheduled=False)


def workflow_enqueued(run_id: int, using: str | None = None) -> None:
    """With ``LEASEJOBS_EAGER``: run the workflow's jobs when the transaction commits, each
    step as its parents' ends enqueue it, until none is due (a failure propagates as for a job).
    ``using``: the run's database (a shard's), else :func:`protocol.job_database`."""
    if not settings.EAGER:
        return
    using = using or protocol.job_database()
    transaction.on_commit(functools.partial(_run_workflow, using, run_id), using=using)


def _run_workflow(using: str, run_id: int) -> None:
    from ..db.dbtime import DbNow
    from ..models import Status

    due = Job.objects.using(using).filter(
        workflow_step__run_id=run_id, status=Status.PENDING, run_at__lte=DbNow()
    )
    with using_database(using):
        while ids := list(due.order_by("pk").values_list("pk", flat=True)):
            for job_id in ids:
                run_eagerly(job_id, rescheduled=False)


__all__ = [
    "JobFailedError",
    "enqueued",
    "raise_failure",
    "run_claimed",
    "run_eagerly",
    "run_one",
    "worker_id",
    "workflow_enqueued",
]
