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
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from ..core import registry
from ..core.json_values import check_text
from ..core.validation import check_queue
from ..db.dbtime import DbNow, as_aware, db_now
from ..errors import JobValidationError
from ..models import Job, Pause, PauseKind
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


def _paused(row: Pause, now: dt.datetime) -> Paused:
    at = as_aware(row.paused_at)
    age = max(0.0, (now - at).total_seconds())
    return Paused(row.kind, row.name, at, row.paused_by, age, row.pk)


def pause(queue: str | None = None, job: str | None = None, *, by: str = "") -> Paused | None:
    """Pause a queue or a job name; the new pause, or ``None`` when it was already paused."""
    kind, name = target(queue, job)
    if not isinstance(by, str) or len(by) > 200:
        raise JobValidationError(f"by must be a text of at most 200 characters, not {by!r}.")
    check_text(by, "by")
    using = job_database()
    names: tuple[str, ...] = (name,)
    if kind == PauseKind.JOB.value:
        _check_known_job(name, using)
        names = registry.names_of(name)
    with transaction.atomic(using=using):
        row = _insert(kind, names[0], by, using)
        _insert_missing(kind, names[1:], by, using)
    if row is None:  # paused already, maybe by a racing call: one row either way
        return None
    row.refresh_from_db(using=using, fields=["paused_at"])
    logger.info("pause.paused kind=%s name=%s by=%s", kind, row.name, by)
    return _paused(row, db_now(using))


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


def _check_known_job(name: str, using: str) -> None:
    """A job-name pause must name a job: registered here, or held by a row of the jobs table
    (one probe of ``leasejobs_name``), so that a typo is refused instead of pausing nothing."""
    if registry.lookup(name) is not None or Job.objects.using(using).filter(name=name).exists():
        return
    close = difflib.get_close_matches(name, list(registry.registered()), n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise JobValidationError(
        f"No job named {name!r} is registered or waiting in the jobs table: nothing to pause."
        + hint
    )


def resume(queue: str | None = None, job: str | None = None, *, by: str = "") -> Paused | None:
    """Lift a pause; the pause lifted, or ``None`` when it was not paused."""
    kind, name = target(queue, job)
    using = job_database()
    names = registry.names_of(name) if kind == PauseKind.JOB.value else (name,)
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
    logger.info("pause.resumed kind=%s name=%s by=%s", kind, row.name, by)
    return _paused(row, now)


def paused(kind: str | None = None) -> list[Paused]:
    """Every pause (of one kind, if given), by kind then name, with its age."""
    using = job_database()
    rows = Pause.objects.using(using).order_by("kind", "name")
    if kind is not None:
        rows = rows.filter(kind=kind)
    found = list(rows)
    if not found:
        return []
    now = db_now(using)
    return [_paused(row, now) for row in found]
