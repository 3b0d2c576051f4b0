"""What an operator does to a job, each one guarded statement: run now, retry now, replay a
dead letter; and the idempotency record a handler writes with its own effects. (Cancel, which
also reaches running jobs, is in ``cancels``.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connections, transaction

from .. import dialects
from ..core import registry, task_rows
from ..db.dbtime import DbNow
from ..db.deadlocks import retry_deadlocks
from ..errors import InvalidTransitionError, JobValidationError, TaskRefusedError
from ..models import CLAIMABLE, DeadLetter, Effect, Job, Status
from .base import job_database, logger
from .enqueues import insert
from .new_rows import row_values
from .workflow_runs import rearm


@retry_deadlocks
def run_now(job_id: int) -> bool:
    """Make a pending or failed job due at once (its attempt budget is unchanged)."""
    changed = (
        Job.objects.using(job_database())
        .filter(pk=job_id, status__in=CLAIMABLE)
        .update(run_at=DbNow())
    )
    if changed:
        logger.info("job.run_now id=%s", job_id)
    return bool(changed)


@retry_deadlocks
def retry_now(job_id: int) -> bool:
    """Make a failed job due at once instead of after its backoff (budget unchanged).

    Guarded on ``failed`` alone, so an operator's "retry" never touches a job that was cancelled,
    claimed or finished since the page was shown.
    """
    changed = (
        Job.objects.using(job_database())
        .filter(pk=job_id, status=Status.FAILED)
        .update(run_at=DbNow())
    )
    if changed:
        logger.info("job.retry_now id=%s", job_id)
    return bool(changed)


class _ReplayRace(Exception):
    pass


def _check_replayable(name: str, task_backend: str) -> None:
    """A replay is an enqueue: refuse, before anything is written, a name that would not run.

    A job's name is found as a worker finds it (its module imported if the allow-list has it:
    this process may not have imported it yet); a ``django.tasks`` row's path is resolved
    here, once, as a worker would, since an enqueue through the backend never stored a path
    that was not a ``Task`` but the code may have changed since.
    """
    if not task_backend:
        registry.find(name)
        return
    try:
        task_rows.handler().resolve(name)
    except (TaskRefusedError, ImproperlyConfigured) as exc:
        raise JobValidationError(f"The task cannot be replayed: {exc}") from None


def replay(
    dead_letter_id: int,
    *,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
) -> Job:
    """Make a new job from a dead letter, with a fresh attempt budget; once only.

    The dead job is never revived (its stale workers' tokens stay stale); the new job is linked
    from the dead letter, and a second replay returns that same job.
    """
    alias = job_database()
    dialects.for_alias(alias).require_utf8(alias, "replay")
    for _ in range(3):
        try:
            return _replay_once(alias, dead_letter_id, args, kwargs)
        except (_ReplayRace, IntegrityError):
            continue
    dead_letter = DeadLetter.objects.using(alias).get(pk=dead_letter_id)
    if dead_letter.replayed_job_id is None:
        raise InvalidTransitionError(f"Dead letter {dead_letter_id} could not be replayed.")
    return Job.objects.using(alias).get(pk=dead_letter.replayed_job_id)


def _replay_once(
    alias: str,
    dead_letter_id: int,
    args: Sequence[Any] | None,
    kwargs: dict[str, Any] | None,
) -> Job:
    """One try of ``replay`` in one transaction; ``_ReplayRace`` when another replay won."""
    with transaction.atomic(using=alias):
        dead_letter = (
            DeadLetter.objects.using(alias)
            .select_for_update()
            .select_related("job")
            .get(pk=dead_letter_id)
        )
        if dead_letter.replayed_job_id is not None:
            return Job.objects.using(alias).get(pk=dead_letter.replayed_job_id)
        original = dead_letter.job
        _check_replayable(dead_letter.name, original.task_backend)
        edited = args is not None or kwargs is not None
        values = row_values(
            dead_letter.name,
            dead_letter.args if args is None else args,
            dead_letter.kwargs if kwargs is None else kwargs,
            queue=original.queue,
            priority=original.priority,
            max_attempts=original.max_attempts,
            dedupe_key=original.dedupe_key,
            task_backend=original.task_backend,
            # Edited arguments are the operator's, at the handler's version; as they were,
            # they keep the version they were written for, and a worker upgrades them.
            version=None if edited or original.task_backend else original.version,
        )
        if values.get("version", 1) != _current_version(values["name"], original.task_backend):
            values.update(_limit_columns(original))  # not recomputed from older arguments
        values["workflow_step_id"] = original.workflow_step_id
        # The replay continues the dead job's trace: its attempts relate to the first enqueue.
        values["trace_context"] = original.trace_context
        new, created = insert(values, alias)
        # insert() returns the live job holding the dedupe key instead of inserting. Such a
        # holder is not this replay's job (even while it is pending with attempt 0): linking
        # it would tie an unrelated job to this dead letter, so refuse.
        if not created:
            raise InvalidTransitionError(
                f"Job {new.pk} already holds dedupe key {original.dedupe_key!r}; "
                "let it finish or cancel it, then replay."
            )
        changed = (
            DeadLetter.objects.using(alias)
            .filter(pk=dead_letter.pk, replayed_job__isnull=True)
            .update(replayed_job=new, replayed_at=DbNow())
        )
        if not changed:
            raise _ReplayRace
        # A workflow's step waits for the new job, and so do the dependants its death ended.
        rearm(alias, original.workflow_step_id, original.pk, new.pk)
        logger.info(
            "job.replayed dead_letter=%s old=%s new=%s", dead_letter.pk, original.pk, new.pk
        )
        return new


def _current_version(name: str, task_backend: str) -> int:
    spec = None if task_backend else registry.lookup(name)
    return spec.version if spec is not None else 1


def _limit_columns(original: Job) -> dict[str, Any]:
    """The limit keys the replayed row stored, kept for a replay of its older arguments."""
    return {
        field: getattr(original, field)
        for field in (
            "concurrency_key",
            "concurrency_limit",
            "rate_key",
            "rate_limit",
            "rate_period",
        )
    }


def record_effect(key: str, job_id: int | None = None) -> bool:
    """Record ``key`` as done in the caller's transaction; False if it was already recorded.

    Must run inside ``transaction.atomic()`` together with the writes it guards, so the key and
    the effect commit or roll back together.
    """
    alias = job_database()
    if not connections[alias].in_atomic_block:
        raise RuntimeError(
            "ctx.first_time() must be called inside transaction.atomic(), with the writes "
            "it guards."
        )
    if not isinstance(key, str) or not key or len(key) > 255:
        raise ValueError("An effect key is a non-empty string of at most 255 characters.")
    try:
        with transaction.atomic(using=alias):
            Effect.objects.using(alias).create(key=key, job_id=job_id)
    except IntegrityError:
        return False
    return True
