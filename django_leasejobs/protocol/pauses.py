"""Pause and resume: a queue or a job name whose due jobs no worker claims.

A pause is a ``Pause`` row. Every dialect's claim excludes what those rows name inside the
claim's own statement, so a claim that begins after a pause commits starts none of the jobs it
names (one that began before may still start what it read: those jobs started before the
pause). Jobs already running finish; resuming deletes the row and the next claim takes them.

A job's rows may carry any of its names: the registered one or a former one it lists in
``@job(aliases=)``. So a job-name pause is resolved when it is made, into one row per name of
the job (the registered name's first), and the claim's exclusion, which tests the row's own
name, holds every row of the job whatever name it carries; the claim's statements stay as they
are. A job whose names change after a pause (a release renames it, or adds an alias) is brought
in step by every worker's maintenance (``cover_aliases``): a job is paused when any of its
names is. Resuming deletes the rows of every name of the job.

Both are guarded and idempotent: the unique (kind, name) key settles racing pauses (one row,
no error), the DELETE is guarded by the names, and each returns what it changed (``None``
when nothing did).

With shards (``LEASEJOBS_QUEUE_DATABASES``) a pause lives where the workers that must obey it
claim: a queue's in the database its jobs are written in (:func:`queue_database`: its exact
entry, else the first glob that matches, else the home database), whatever database the caller
works on; a job name's in every queue database, since a job's rows may be in any queue (each
database's rows in its own transaction: a pause that fails half-way is made whole by pausing
again). Pauses name one queue, never a glob (a queue name holds none of ``*?[``), so each has
one home. Without the setting, a pause is written in :func:`job_database`, as before.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from ..core import registry
from ..core.conf import settings
from ..core.json_values import check_text
from ..core.validation import check_queue
from ..db.dbtime import DbNow, as_aware, db_now
from ..errors import JobValidationError
from ..models import Job, Pause, PauseKind
from ..models.databases import queue_database, queue_databases, using_database
from .base import job_database, logger

JOB_NAME = re.compile(r"[^\s\x00]{1,200}")
"""Matched whole (``fullmatch``): with ``$``, a name ending in a newline would pass."""


@dataclass(frozen=True)
class Paused:
    """One pause, and how long it has lasted at the database's time it was read."""

    kind: str
    name: str
    paused_at: dt.datetime
    paused_by: str
    age: float
    """Seconds since ``paused_at``."""
    id: int = 0
    database: str = ""
    """The queue database holding the pause row (with shards, the workers that obey it)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "name": self.name,
            "paused_at": self.paused_at.isoformat(),
            "paused_by": self.paused_by,
            "age": self.age,
        }


def target(queue: str | None = None, job: str | None = None) -> tuple[str, str]:
    """(kind, name) of what a call names: exactly one of ``queue`` and ``job``."""
    if (queue is None) == (job is None):
        raise JobValidationError("Name exactly one of queue= and job= to pause or resume.")
    if queue is not None:
        return PauseKind.QUEUE.value, check_queue(queue)
    if not isinstance(job, str) or not JOB_NAME.fullmatch(job):
        raise JobValidationError(
            f"job must be a job name (1-200 characters, no spaces), not {job!r}."
        )
    return PauseKind.JOB.value, check_text(job, "job name")


def _paused(row: Pause, now: dt.datetime, using: str) -> Paused:
    at = as_aware(row.paused_at)
    age = max(0.0, (now - at).total_seconds())
    return Paused(row.kind, row.name, at, row.paused_by, age, row.pk, using)


def pause_databases(kind: str, name: str) -> list[str]:
    """The databases the pause of (``kind``, ``name``) is written in and read from: the queue's
    own (:func:`queue_database`), or, for a job name, every queue database (home first); just
    :func:`job_database` without ``LEASEJOBS_QUEUE_DATABASES``."""
    if not settings.QUEUE_DATABASES:
        return [job_database()]
    if kind == PauseKind.QUEUE.value:
        return [queue_database(name)]
    return queue_databases()


def pause(queue: str | None = None, job: str | None = None, *, by: str = "") -> Paused | None:
    """Pause a queue or a job name (in :func:`pause_databases`); the new pause (the first
    database's that changed), or ``None`` when it was already paused (in each)."""
    kind, name = target(queue, job)
    if not isinstance(by, str) or len(by) > 200:
        raise JobValidationError(f"by must be a text of at most 200 characters, not {by!r}.")
    check_text(by, "by")
    aliases = pause_databases(kind, name)
    names: tuple[str, ...] = (name,)
    if kind == PauseKind.JOB.value:
        _check_known_job(name, aliases)
        names = registry.names_of(name)
    made = None
    for using in aliases:
        with using_database(using):
            row = _pause_in(using, kind, names, by)
        made = made or row
    return made


def _pause_in(using: str, kind: str, names: Sequence[str], by: str) -> Paused | None:
    """The pause rows of ``names`` in one database; the first name's new pause, or ``None``."""
    with transaction.atomic(using=using):
        row = _insert(kind, names[0], by, using)
        _insert_missing(kind, names[1:], by, using)
    if row is None:  # paused already, maybe by a racing call: one row either way
        return None
    row.refresh_from_db(using=using, fields=["paused_at"])
    logger.info("pause.paused kind=%s name=%s by=%s database=%s", kind, row.name, by, using)
    return _paused(row, db_now(using), using)


def _insert(kind: str, name: str, by: str, using: str) -> Pause | None:
    """The new pause row, or ``None`` when the unique (kind, name) key holds one already."""
    try:
        with transaction.atomic(using=using):  # a savepoint: the caller's transaction goes on
            return Pause.objects.using(using).create(
                kind=kind, name=name, paused_by=by, paused_at=DbNow()
            )
    except IntegrityError:
        return None


def _insert_missing(kind: str, names: Sequence[str], by: str, using: str) -> None:
    """A pause row for each name that has none (insert-or-ignore on the unique key)."""
    if names:
        rows = [Pause(kind=kind, name=name, paused_by=by, paused_at=DbNow()) for name in names]
        Pause.objects.using(using).bulk_create(rows, ignore_conflicts=True)


def cover_aliases(using: str | None = None) -> list[str]:
    """Pause every name of each registered job one of whose names is paused; the names paused.

    Run by every worker's maintenance, for the jobs its release knows: a pause made before a
    release renamed the job (the old name, now an alias) or gave it a new alias holds the
    job's rows under every name. One read of the job-name pauses, and an insert-or-ignore only
    when a name is missing.
    """
    using = using or job_database()
    rows = {
        row.name: row
        for row in Pause.objects.using(using)
        .filter(kind=PauseKind.JOB)
        .only("name", "paused_by", "paused_at")
    }
    if not rows:
        return []
    missing: dict[str, Pause] = {}
    for spec in registry.registered().values():
        names = (spec.name, *spec.aliases)
        source = next((rows[n] for n in names if n in rows), None)
        if source is not None:  # the new rows keep the pause's time and author: its age holds
            missing.update(
                (
                    n,
                    Pause(
                        kind=PauseKind.JOB,
                        name=n,
                        paused_by=source.paused_by,
                        paused_at=source.paused_at,
                    ),
                )
                for n in names
                if n not in rows
            )
    if missing:
        Pause.objects.using(using).bulk_create(list(missing.values()), ignore_conflicts=True)
        logger.info("pause.covered names=%s", ",".join(sorted(missing)))
    return sorted(missing)


def _check_known_job(name: str, aliases: Sequence[str]) -> None:
    """A job-name pause must name a job: registered here, or held by a row of the jobs table
    of one of ``aliases`` (one probe of ``leasejobs_name`` each), so that a typo is refused
    instead of pausing nothing."""
    if registry.lookup(name) is not None:
        return
    if any(Job.objects.using(using).filter(name=name).exists() for using in aliases):
        return
    close = difflib.get_close_matches(name, list(registry.registered()), n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise JobValidationError(
        f"No job named {name!r} is registered or waiting in the jobs table: nothing to pause."
        + hint
    )


def resume(queue: str | None = None, job: str | None = None, *, by: str = "") -> Paused | None:
    """Lift a pause (in each of :func:`pause_databases`); the pause lifted (the first
    database's that changed), or ``None`` when it was not paused."""
    kind, name = target(queue, job)
    names = registry.names_of(name) if kind == PauseKind.JOB.value else (name,)
    lifted = None
    for using in pause_databases(kind, name):
        with using_database(using):
            row = _resume_in(using, kind, names, by)
        lifted = lifted or row
    return lifted


def _resume_in(using: str, kind: str, names: Sequence[str], by: str) -> Paused | None:
    """Delete the pause rows of ``names`` in one database; the pause lifted, or ``None``."""
    rows = Pause.objects.using(using).filter(kind=kind, name__in=names)
    found = {row.name: row for row in rows}
    if not found:
        return None
    # The registered name's row stands for the job (or, when it has none, the first name's).
    row = next(found[n] for n in names if n in found)
    now = db_now(using)
    # Guarded by the row's id: of racing resumes, the one whose DELETE removed it says so.
    deleted, _ = Pause.objects.using(using).filter(pk=row.pk).delete()
    rows.delete()  # the job's other names
    if not deleted:
        return None
    logger.info("pause.resumed kind=%s name=%s by=%s database=%s", kind, row.name, by, using)
    return _paused(row, now, using)


def paused(kind: str | None = None) -> list[Paused]:
    """Every pause (of one kind, if given) in :func:`job_database`, by kind then name, with its
    age. With shards, each queue database holds its own: ``jobqueue list`` reads each inside
    ``using_database``."""
    using = job_database()
    rows = Pause.objects.using(using).order_by("kind", "name")
    if kind is not None:
        rows = rows.filter(kind=kind)
    found = list(rows)
    if not found:
        return []
    now = db_now(using)
    return [_paused(row, now, using) for row in found]


def find(kind: str, name: str) -> Paused | None:
    """The pause of (``kind``, ``name``) exactly, read where it lives (:func:`pause_databases`,
    the first that holds it); ``None`` when it is not paused."""
    for using in pause_databases(kind, name):
        row = Pause.objects.using(using).filter(kind=kind, name=name).first()
        if row is not None:
            return _paused(row, db_now(using), using)
    return None
