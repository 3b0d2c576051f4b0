"""Complete: a succeeded attempt, written only with the token that still owns the job.

An attempt whose arguments a worker upgraded (``@job(upgrade=)``) writes them, with their
version, in the same fenced statement: the row is rewritten only when the handler succeeded
on them, so a failed upgrade or a failed handler leaves the arguments as they were enqueued.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from django.db import connections, transaction

from .. import dialects
from ..core import json_values
from ..db import signals
from ..db.deadlocks import retry_deadlocks
from ..dialects import Completed, Completion, LogRow, succeeded_fields
from ..errors import JobValidationError, StaleAttemptError
from ..models import Job, Status
from .base import (
    Failure,
    Outcome,
    announce_finished,
    fenced_outcome,
    job_database,
    logger,
    send_finish_signal,
)
from .failures import fail
from .workflow_completions import complete_step_job, complete_step_jobs


class Upgraded(NamedTuple):
    """Arguments a worker brought to the handler's version, stored by the success write."""

    version: int
    args: list[Any]
    kwargs: dict[str, Any]

    def fields(self) -> dict[str, Any]:
        return {"version": self.version, "args": self.args, "kwargs": self.kwargs}


@retry_deadlocks
def complete(
    job_id: int,
    attempt: int,
    result: Any = None,
    *,
    finished_by: str = "",
    upgraded: Upgraded | None = None,
) -> Outcome:
    """Mark the job succeeded, only if ``attempt`` still owns it.

    ``finished_by`` (a worker id) records who ran the successful attempt (the tasks backend
    reports it in ``worker_ids``). A result that cannot be stored fails the job instead.
    ``upgraded``: the arguments the handler was called with, at its version, written in the
    same fenced statement.
    """
    try:
        json_values.check_json(result, "result")
    except JobValidationError as exc:
        return fail(job_id, attempt, Failure(f"Unstorable return value: {exc}"), retryable=False)
    using = job_database()
    completion = Completion(job_id, attempt, result)
    if upgraded is None:
        changed = dialects.for_alias(using).complete_one(using, completion, finished_by)
    else:
        changed = _complete_upgraded(using, completion, finished_by, upgraded)
    if not changed:  # a workflow's job is completed with its step, or the token is stale
        changed = complete_step_job(
            using, job_id, attempt, result, finished_by, upgraded.fields() if upgraded else None
        )
    if changed:
        send_finish_signal(signals.job_succeeded, using, {job_id: attempt}, result=result)
    return fenced_outcome(changed, "succeeded", job_id, attempt, Outcome.SUCCEEDED)


def _complete_upgraded(
    using: str, completion: Completion, finished_by: str, upgraded: Upgraded
) -> bool:
    """The success write of an upgraded attempt: one fenced UPDATE that also stores the
    upgraded arguments (rare: once per row of an older version, so the ORM's statement)."""
    with transaction.atomic(using=using):
        changed = (
            Job.objects.using(using)
            .filter(
                pk=completion.id,
                attempt=completion.attempt,
                status=Status.RUNNING,
                workflow_step__isnull=True,  # a workflow's job is completed with its step
            )
            .update(**succeeded_fields(completion.result, finished_by), **upgraded.fields())
        )
        if changed:
            announce_finished(using, [completion.id])
    return bool(changed)


def complete_many(
    completions: Iterable[tuple[int, int] | tuple[int, int, Any]],
    *,
    finished_by: str = "",
    then: Then | None = None,
    logs: Sequence[LogRow] = (),
) -> dict[int, Outcome]:
    """Mark many jobs succeeded in as few statements as the database allows, each row fenced
    by its own token; an item is ``(id, attempt)`` or ``(id, attempt, result)``.

    A result that cannot be stored fails its job, as ``complete()`` does. Plain jobs and a
    workflow's jobs (completed with their steps) may come in one batch: which is which is
    read from the rows, never asked of the caller. The batch's successes are written all or
    nothing: after an error none is, and the caller may try the whole batch again (a write
    that had committed would find its jobs stale on that try). ``then`` is called with the
    ids completed, in the same transaction (the worker writes their attempts' logs there:
    one commit for both). ``logs``: log rows that need no job cap applied (first attempts'),
    written in the batch's own transaction (on PostgreSQL, its one statement) for the jobs it
    completed; an error writing them writes nothing of the batch, as any other error.
    """
    outcomes: dict[int, Outcome] = {}
    storable: list[Completion] = []
    for item in completions:
        done = Completion(*item)
        try:
            json_values.check_json(done.result, "result")
        except JobValidationError:
            outcomes[done.id] = complete(*done, finished_by=finished_by)  # fails it
            continue
        storable.append(done)
    if not storable:
        return outcomes
    using = job_database()
    # One statement for a batch of plain jobs (the common case); a batch holding a
    # workflow's job is left unwritten by it, and written whole in one transaction.
    written = _complete_plain(using, storable, finished_by, then, logs)
    succeeded = written.jobs
    if written.steps:
        succeeded = _complete_with_steps(using, storable, written.steps, finished_by, then, logs)
    for done in storable:
        outcomes[done.id] = fenced_outcome(
            int(done.id in succeeded), "succeeded", done.id, done.attempt, Outcome.SUCCEEDED
        )
    if succeeded and signals.wanted(signals.job_succeeded):
        no_result = {c.id: c.attempt for c in storable if c.id in succeeded and c.result is None}
        if no_result:
            send_finish_signal(signals.job_succeeded, using, no_result, result=None)
        for c in storable:
            if c.id in succeeded and c.result is not None:
                send_finish_signal(signals.job_succeeded, using, {c.id: c.attempt}, result=c.result)
    return outcomes


Then = Callable[[set[int]], None]
"""Called with the ids a batch completed, inside the transaction that completed them."""


@retry_deadlocks
def _complete_plain(
    using: str,
    completions: list[Completion],
    finished_by: str,
    then: Then | None,
    logs: Sequence[LogRow],
) -> Completed:
    """The batch's one statement (nothing written if it holds a workflow's job), and ``then``
    with what it completed, in one transaction."""
    dialect = dialects.for_alias(using)
    if then is None:
        return dialect.complete_many(using, completions, finished_by, logs)
    with transaction.atomic(using=using):
        written = dialect.complete_many(using, completions, finished_by, logs)
        if written.jobs and not written.steps:
            then(written.jobs)
    return written


@retry_deadlocks  # the job rows, as for a plain batch; steps and runs lock in one order
def _complete_with_steps(
    using: str,
    completions: list[Completion],
    steps: set[int],
    finished_by: str,
    then: Then | None = None,
    logs: Sequence[LogRow] = (),
) -> set[int]:
    """A batch holding workflow jobs (``steps``): the plain ones in one statement, the
    workflow ones with their steps, in one transaction (with ``then``, and ``logs``)."""
    plain = [c for c in completions if c.id not in steps]
    dialect = dialects.for_alias(using)
    with transaction.atomic(using=using):
        succeeded: set[int] = set()
        if plain:
            succeeded = dialect.complete_many(using, plain, finished_by, logs).jobs
        stepped = complete_step_jobs(using, [c for c in completions if c.id in steps], finished_by)
        if kept := [row for row in logs if row.job_id in stepped]:
            dialect.insert_logs(using, kept)
        succeeded |= stepped
        if then is not None and succeeded:
            then(succeeded)
        return succeeded


def complete_in_transaction(
    job_id: int, attempt: int, result: Any = None, upgraded: Upgraded | None = None
) -> None:
    """Complete the job inside the handler's own transaction (exactly-once database effects).

    Raises ``StaleAttemptError`` when the token no longer owns the job, so the handler's writes
    roll back with it. ``upgraded``: as for ``complete``.
    """
    using = job_database()
    if not connections[using].in_atomic_block:
        raise RuntimeError("ctx.complete() must be called inside transaction.atomic().")
    json_values.check_json(result, "result")
    changed = (
        Job.objects.using(using)
        .filter(pk=job_id, attempt=attempt, status=Status.RUNNING, workflow_step__isnull=True)
        .update(**succeeded_fields(result), **(upgraded.fields() if upgraded else {}))
    ) or complete_step_job(
        using, job_id, attempt, result, fields=upgraded.fields() if upgraded else None
    )
    if not changed:
        logger.warning("job.stale id=%s attempt=%s action=succeeded", job_id, attempt)
        raise StaleAttemptError(f"Job {job_id} attempt {attempt} no longer holds its lease.")
    announce_finished(using, [job_id])  # delivered when the handler's transaction commits
    # DEBUG: the caller (the worker, ``run_job``) logs the success when the handler returns.
    logger.debug("job.succeeded id=%s attempt=%s in_transaction=true", job_id, attempt)
    send_finish_signal(signals.job_succeeded, using, {job_id: attempt}, result=result)
