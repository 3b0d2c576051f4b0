"""What every transition shares: its outcome, its failure record, where it writes, who hears.

Who hears, two ways with two verbs: ``announce_*`` wakes waiters and workers through the
dialect (LISTEN/NOTIFY where the database has it); ``send_*_signal`` sends Django signals
(``django_leasejobs.signals``) at commit."""

from __future__ import annotations

import enum
import logging
import traceback as traceback_module
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import dialects
from ..db import signals
from ..models import Job

# Every transition's alias: one function for the whole package (models/databases.py).
from ..models.databases import job_database as job_database

logger = logging.getLogger("django_leasejobs")


class Outcome(enum.Enum):
    """What a guarded write did."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    DEAD = "dead"
    RELEASED = "released"
    SNOOZED = "snoozed"
    """The handler raised ``Snooze``: the job waits again, its attempt not charged."""
    CANCELLED = "cancelled"
    """The attempt ended because an operator asked to cancel the running job."""
    STALE = "stale"
    """Zero rows changed: the token no longer owns the job (lease lost, job reclaimed)."""


HEADLINE = 200
"""Characters of an error a log line shows (its advice, if any, comes whole after them)."""


@dataclass(frozen=True)
class Failure:
    """An attempt's error, as recorded in the job's history and its dead letter."""

    error: str
    traceback: str = ""
    kind: str = "error"
    advice: str = ""
    """What to do, when the error ends with it (an unknown job): kept whole in log lines."""

    @property
    def headline(self) -> str:
        """The error's first line, short enough for a log line; its advice is never cut."""
        line = self.error.splitlines()[0] if self.error else ""
        if self.advice and line.endswith(self.advice):
            return f"{line[: -len(self.advice)].rstrip()[:HEADLINE]} {self.advice}"
        return line[:HEADLINE]

    @classmethod
    def from_exception(cls, exc: BaseException, kind: str = "error") -> Failure:
        """The exception's class, message and traceback, whole: ``fail`` bounds what it stores
        (``error_history``), with a marker where it cut."""
        text = "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__))
        return cls(f"{type(exc).__name__}: {exc}", text, kind)


def announce_finished(using: str, ids: Sequence[int]) -> None:
    """Wake callers waiting for these jobs (``job.wait()``) when the transaction commits."""
    dialects.for_alias(using).announce_finished(using, ids)


def fenced_outcome(
    changed: int, action: str, job_id: int, attempt: int, outcome: Outcome
) -> Outcome:
    """``outcome``, or ``Outcome.STALE`` (logged) when the guarded write changed no row."""
    if not changed:
        logger.warning("job.stale id=%s attempt=%s action=%s", job_id, attempt, action)
        return Outcome.STALE
    # DEBUG: the worker logs the same transition at INFO with name, queue and duration.
    logger.debug("job.%s id=%s attempt=%s", action, job_id, attempt)
    return outcome


def send_enqueued_signal(job: Job, using: str) -> None:
    """``job_enqueued`` at commit, when someone listens (a Django signal: no NOTIFY, which
    the dialect's insert or ``announce`` sends)."""
    if signals.wanted(signals.job_enqueued):
        signals.send_after_commit(signals.job_enqueued, using, job=job)


def send_finish_signal(signal: Any, using: str, attempts: dict[int, int], **extra: Any) -> None:
    """Send a finish signal for each job of ``attempts`` (id to attempt), with its name and
    queue (read only when someone listens)."""
    if not signals.wanted(signal):
        return
    rows = Job.objects.using(using).filter(pk__in=list(attempts)).values_list("pk", "name", "queue")
    for job_id, name, queue in rows:
        signals.send_after_commit(
            signal, using, job_id=job_id, name=name, queue=queue, attempt=attempts[job_id], **extra
        )
