"""The dialect interface, implemented with the ORM alone.

One public method per operation the protocol calls whose SQL differs per database (named in
``base.OPERATIONS``): ``insert``, ``insert_many``, ``insert_rows``, ``claim_limited``,
``renew``, ``complete_one``, ``complete_many``, ``complete_steps``, ``count_steps``,
``announce``, ``announce_cancel``, ``announce_finished``, ``prune_limiters``,
``upsert_worker``, ``insert_logs``, ``check_sendable`` and ``require_utf8``. Beside them, the
database's capabilities are attributes (``notifies``, ``utc_session``, ``journal_mode_query``),
as Django's ``connection.features`` are, so that no code outside ``dialects/`` names a
database.
Each takes the database alias first, owns its statements and, where it has several, its
transaction; its steps are private to the dialect (a leading underscore: ``_claim``, the
plain claim that ``claim_limited`` falls back to, is one), so a database overrides a step or
the whole operation without the protocol knowing. The protocol guards and fences, the dialect
only says how the database does it. These versions use querysets and work on every database
Django supports; MariaDB and MySQL run them as they are. Every write here is guarded the same
way as its SQL versions: by token (id, attempt) and status, so "zero rows changed" means stale
on every database.

The claim and the lease's renewal (``claim_limited``, ``renew`` and their steps) are
:mod:`.leasing`'s ``LeaseSteps``, which ``Dialect`` inherits; the rest is here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from django.db import connections, transaction
from django.db.models import Model
from django.db.models.expressions import DatabaseDefault

from ...db.dbtime import DbNow
from ...db.deadlocks import retry_deadlocks
from ...models import Job, JobLog, Limiter, Status, Worker
from .. import fair_lines, fair_stamps
from ..tokens import Completion, Token, succeeded_fields, tokens_q
from . import limiter_pruning
from .expressions import after
from .leasing import LeaseSteps, Renewed
from .replication import NO_REPLICATION, ReplicationReader
from .workflow_steps import Counted, StepsCompleted, complete_steps, count_steps

__all__ = [
    "OPERATIONS",
    "Completed",
    "Completion",
    "Counted",
    "Dialect",
    "Renewed",
    "StepsCompleted",
    "Token",
    "after",
    "succeeded_fields",
    "tokens_q",
]


class Completed(NamedTuple):
    """What ``complete_many`` did: the plain jobs it completed; or, for a batch holding a
    workflow's job, nothing, and ``steps`` names those jobs."""

    jobs: set[int]
    steps: set[int]


class LogRow(NamedTuple):
    """One ended attempt's logs, as ``insert_logs`` writes them (a ``JobLog`` row)."""

    job_id: int
    attempt: int
    records: list[dict[str, Any]]
    size: int


def refresh_defaults(job: Job, alias: str) -> None:
    """Read back the columns the database filled (``run_at``, ``created_at``), where the
    INSERT could not return them."""
    stale = [f for f in ("run_at", "created_at") if isinstance(getattr(job, f), DatabaseDefault)]
    if stale:
        job.refresh_from_db(using=alias, fields=stale)


@retry_deadlocks
def _complete_group(alias: str, tokens: list[Token], finished_by: str) -> set[int]:
    """One fenced UPDATE for every token, then the ids it succeeded."""
    jobs = Job.objects.using(alias)
    # A workflow's job is completed with its step (protocol.workflow_steps), never here.
    jobs = jobs.filter(workflow_step__isnull=True)
    jobs.filter(tokens_q(tokens), status=Status.RUNNING).update(
        **succeeded_fields(None, finished_by)
    )
    return set(jobs.filter(tokens_q(tokens), status=Status.SUCCEEDED).values_list("pk", flat=True))


def _complete_one(alias: str, completion: Completion, finished_by: str) -> int:
    """One fenced UPDATE, in ``complete_many``'s transaction."""
    return (
        Job.objects.using(alias)
        .filter(pk=completion.id, attempt=completion.attempt, status=Status.RUNNING)
        .filter(workflow_step__isnull=True)
        .update(**succeeded_fields(completion.result, finished_by))
    )


OPERATIONS = (
    "insert",
    "insert_many",
    "insert_rows",
    "claim_limited",
    "renew",
    "complete_one",
    "complete_many",
    "complete_steps",
    "count_steps",
    "announce",
    "announce_cancel",
    "announce_finished",
    "prune_limiters",
    "upsert_worker",
    "insert_logs",
    "check_sendable",
    "require_utf8",
)
"""The dialect's public methods: what the layers above call, and nothing else
(tests/dialects/test_interface.py)."""


class Dialect(LeaseSteps):
    """One database's way of doing each operation; these are the ORM's ways.

    A new database is a subclass that passes ``tests/dialects`` (every public method, on every
    database, beside this class itself).
    """

    notifies = False
    """Whether the database announces (LISTEN/NOTIFY): enqueues wake idle workers, finishes
    wake callers waiting for a job, cancel requests reach a worker at once. Only with
    ``LEASEJOBS_NOTIFY`` on (``dialects.notifies``)."""

    utc_session: str | None = None
    """The statement that puts a new session in UTC under ``USE_TZ``, where the database's
    clock follows the session's time zone (``dialects.session``); None where it is UTC."""

    journal_mode_query: str | None = None
    """The statement that reads the database's journal mode, where the system checks want WAL
    (``leasejobs.W001``); None where there is no such mode."""

    replication: ReplicationReader = NO_REPLICATION
    """How the database says whether it is a standby and its lag (``dialects.replication``),
    for the admin reading a replica (``LEASEJOBS_READ_DATABASES``); here: none to ask."""

    def insert(self, alias: str, values: dict[str, Any]) -> Job:
        """INSERT one row of ``values`` (field name or attname to value) and return it; a
        row with a fair key gets its place first (``fair_stamps``)."""
        if fair_stamps.needs_place(values):
            values = dict(values)  # the caller's (a dedupe's retry) stays as it was
            fair_stamps.stamp(self._fair_lines, alias, [values])
        job = Job(**values)
        job.save(using=alias, force_insert=True)
        refresh_defaults(job, alias)
        return job

    def insert_many(self, alias: str, rows: Iterable[dict[str, Any]]) -> list[Job]:
        """INSERT rows in bulk, in the caller's transaction; return them in order, each with
        a fair key given its place first."""
        jobs = [Job(**values) for values in fair_stamps.stamped(self._fair_lines, alias, rows)]
        self.insert_rows(alias, jobs)
        for job in jobs:
            refresh_defaults(job, alias)
        return jobs

    def insert_rows(self, alias: str, rows: Sequence[Model]) -> None:
        """INSERT model instances of one model in the caller's transaction, in order, each given
        its primary key: in bulk where a multi-row INSERT returns the ids, else one by one."""
        if not rows:
            return
        if connections[alias].features.can_return_rows_from_bulk_insert:
            type(rows[0])._default_manager.using(alias).bulk_create(rows, batch_size=1000)
        else:
            # MySQL 8 cannot return ids from a multi-row INSERT (MariaDB 10.5+ can).
            for row in rows:
                row.save(using=alias, force_insert=True)

    def check_sendable(self, alias: str, fields: Iterable[tuple[str, Any]]) -> None:
        """Raise ``JobValidationError`` for a text value among ``(field, value)`` pairs that the
        session could change on its way to the database, before a statement sends it (a
        dedupe key's lookup). Here every value arrives as given."""

    def require_utf8(self, alias: str, action: str) -> None:
        """Refuse ``action`` (``JobValidationError``), which reads stored text and sends it
        again, on a session that could change that text. Here none would."""

    def announce(self, alias: str, queues: Sequence[str]) -> None:
        """Wake idle workers of ``queues`` when the transaction commits (where it can)."""

    def announce_cancel(self, alias: str, job_id: int) -> None:
        """Tell the running job's worker at once that it was asked to cancel (where it can).

        Elsewhere the worker learns it from its next renewal (``Renewed.cancel_requested``).
        """

    def announce_finished(self, alias: str, ids: Sequence[int]) -> None:
        """Tell callers waiting for ``ids`` that these jobs finished, when the current
        transaction commits (where it can; elsewhere waiters poll). The protocol calls it in
        the transaction that writes the finish, so the two commit together."""

    def complete_one(self, alias: str, completion: Completion, finished_by: str) -> bool:
        """Mark one attempt succeeded, fenced by its token, and announce it where finishes are
        announced, in one statement; whether it was. Not a workflow's job (``workflow_step``
        set): the protocol completes those with their step."""
        return bool(
            Job.objects.using(alias)
            .filter(pk=completion.id, attempt=completion.attempt, status=Status.RUNNING)
            .filter(workflow_step__isnull=True)
            .update(**succeeded_fields(completion.result, finished_by))
        )

    @retry_deadlocks
    def complete_many(
        self,
        alias: str,
        completions: list[Completion],
        finished_by: str,
        logs: Sequence[LogRow] = (),
    ) -> Completed:
        """Mark these attempts succeeded, each row fenced; return the ids that were, and
        announce them (``announce_finished``) in the same transaction. A batch that holds a
        workflow's job is not written at all: ``Completed.steps`` names those jobs (the
        protocol completes such a batch, with the steps, in one transaction of its own).

        One transaction (one UPDATE, or one per row with a result): an error leaves none of
        them written, so the caller may try the whole batch again; had the rows before the
        error committed, that try would find them succeeded and stale. ``logs``: log rows
        (no job cap to apply) written in it, those of the jobs it completed.
        """
        with transaction.atomic(using=alias):
            ids = [c.id for c in completions]
            steps = Job.objects.using(alias).filter(pk__in=ids, workflow_step__isnull=False)
            workflow = set(steps.values_list("pk", flat=True))
            if workflow:
                return Completed(set(), workflow)
            if all(c.result is None for c in completions):
                tokens = [Token(c.id, c.attempt) for c in completions]
                done = _complete_group(alias, tokens, finished_by)
            else:
                done = {c.id for c in completions if _complete_one(alias, c, finished_by)}
            kept = [row for row in logs if row.job_id in done]
            if kept:
                self.insert_logs(alias, kept)
            return Completed(done, set())

    def complete_steps(
        self, alias: str, completions: list[Completion], finished_by: str
    ) -> StepsCompleted:
        """Mark the workflow jobs among these attempts succeeded, each row fenced, and move
        their steps out of ``released`` (each guarded by its latest job), in the caller's
        transaction (see ``workflow_steps``), and announce the jobs (``announce_finished``).
        Plain jobs and stale tokens are left as they are. Locks the jobs, then the steps."""
        done = complete_steps(alias, completions, finished_by)
        self.announce_finished(alias, sorted(done.jobs))
        return done

    def count_steps(self, alias: str, children: dict[int, int], runs: dict[int, int]) -> Counted:
        """Take the given number of pending parents off each child, in id order, then, when
        no child is left ready, add the given steps succeeded to each run, in id order, in
        the caller's transaction; the children left ready, the runs that ended, and whether
        the runs were counted (the protocol enqueues the ready children first, then calls
        again with the runs alone: no job's module is imported while a run's row is locked).
        """
        return count_steps(alias, children, runs)

    def prune_limiters(
        self, alias: str, older_than: dt.timedelta, batch: int, after_key: str
    ) -> tuple[int, str]:
        """Delete one batch of prunable limiter rows after ``after_key``, passing over those a
        claimer holds; return (rows deleted, last key looked at). See ``limiter_pruning``."""
        with transaction.atomic(using=alias):
            chosen = limiter_pruning.prunable(alias, older_than).filter(key__gt=after_key)
            chosen = chosen.order_by("key")
            locked = connections[alias].features.has_select_for_update_skip_locked
            if locked:
                chosen = chosen.select_for_update(skip_locked=True)
            keys = list(chosen.values_list("key", flat=True)[:batch])
            if not keys:
                return 0, after_key
            # Rows locked here cannot be refilled (a claim locks a key's row first): delete them
            # by key. Repeating the conditions would read the job table with locks (InnoDB's
            # DELETE does) and wait on the rows an open claim has just started.
            doomed = (
                Limiter.objects.using(alias)
                if locked
                else limiter_pruning.prunable(alias, older_than)
            )
            deleted, _ = doomed.filter(key__in=keys).delete()
        return deleted, keys[-1]

    def _fair_lines(self, alias: str, groups: Sequence[fair_lines.Group]) -> list[fair_lines.Line]:
        """The step of ``insert`` and ``insert_many`` that reads where each fair key of an
        enqueue stands (its queue's head, its last place, the clock), in the order given: one
        statement (``dialects/fair_lines.py``)."""
        return fair_lines.read_lines(alias, groups)

    def insert_logs(self, alias: str, rows: Sequence[LogRow]) -> None:
        """INSERT ended attempts' log rows, in the caller's transaction: one statement
        (Django's bulk insert)."""
        JobLog.objects.using(alias).bulk_create(JobLog(**row._asdict()) for row in rows)

    def upsert_worker(self, alias: str, row: dict[str, Any]) -> None:
        """INSERT the worker's row, or update the one of the same ``worker_id``: one statement
        (Django writes ``ON CONFLICT`` or ``ON DUPLICATE KEY``). ``started_at`` is written on
        the insert only, so a row keeps the time its worker first beat; ``last_seen_at`` is
        the database's now on every beat."""
        stamped = {name: DbNow() for name in ("started_at", "last_seen_at")}
        # A database that cannot name the conflict's target (MySQL) uses its only unique key.
        named = connections[alias].features.supports_update_conflicts_with_target
        Worker.objects.using(alias).bulk_create(
            [Worker(**row, **stamped)],
            update_conflicts=True,
            unique_fields=["worker_id"] if named else None,
            update_fields=[name for name in [*row, "last_seen_at"] if name != "worker_id"],
        )
