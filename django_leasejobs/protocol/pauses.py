"""Pause and resume: a queue or a job name whose due jobs no worker claims.

A pause is a ``Pause`` row. Every dialect's claim excludes what those rows name inside the
claim's own statement, so a claim that begins after a pause commits starts none of the jobs it
names (one that began before may still start what it read: those jobs started before the
pause). Jobs already running finish; resuming deletes the row and the next claim takes them.

Both are guarded and idempotent: the unique (kind, name) key settles racing pauses (one row,
no error), the DELETE is guarded by the row's id, and each returns what it changed (``None``
when nothing did).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
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
    if kind == PauseKind.JOB.value:
        _check_known_job(name, using)
    try:
        with transaction.atomic(using=using):
            row = Pause.objects.using(using).create(
                kind=kind, name=name, paused_by=by, paused_at=DbNow()
            )
    except IntegrityError:  # paused already, maybe by a racing call: one row either way
        return None
    row.refresh_from_db(using=using, fields=["paused_at"])
    logger.info("pause.paused kind=%s name=%s by=%s", kind, name, by)
    return _paused(row, db_now(using))


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
    rows = Pause.objects.using(using)
    row = rows.filter(kind=kind, name=name).first()
    if row is None:
        return None
    now = db_now(using)
    deleted, _ = rows.filter(pk=row.pk).delete()  # guarded: a racing resume deletes it once
    if not deleted:
        return None
    logger.info("pause.resumed kind=%s name=%s by=%s", kind, name, by)
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
