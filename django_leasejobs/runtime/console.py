"""What ``runjobworker`` writes for people on its stdout: a banner, then one line per attempt.

As ``runserver`` and Celery do, the banner is written whatever the project's ``LOGGING`` says:
a worker that shows nothing at start cannot be told from one that is stuck, or serving the
wrong queues or database. The per-attempt lines follow at verbosity 1 and up, but only when
the project sends the ``django_leasejobs`` logger's records nowhere (:func:`logging_configured`):
a project that configured logging for it gets the structured ``job.*`` log lines instead,
never both. The library configures no logging itself (no ``basicConfig``, no handler added to a
logger the project owns); writing to the command's own stdout is all it does.

Without a ``LOGGING`` for the app's logger, Python's last-resort handler would print its
warnings on stderr, the dead job the console just wrote among them: one event, two lines. So
for the length of its run the command gives the app's logger a handler of its own
(:func:`command_logging`), only when the project configured none, and takes it off when the
run ends: the warnings the console's lines do not say go to stderr, once each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from django.db import connections

from .. import dialects
from ..core import registry
from ..models import Job
from ..protocol import Outcome, job_database
from .options import WorkerOptions

LOGGER = "django_leasejobs"


class Output(Protocol):
    """A management command's ``self.stdout`` (``OutputWrapper``): it adds the newline."""

    def write(self, msg: str = ...) -> object:
        """Write ``msg`` and a newline."""


def logging_configured(name: str = LOGGER) -> bool:
    """Whether a handler will receive the logger's records: one of its own or an ancestor's
    (the root logger's included), as ``LOGGING`` or any other setup put there.

    Django's default logging configures only the ``django`` loggers, so a project that never
    mentions ours has none: then the command's own lines are all that anyone sees.
    """
    return logging.getLogger(name).hasHandlers()


ATTEMPT_EVENTS = frozenset({"job.dead", "job.stale", "job.deferred"})
"""The warnings whose event the console's per-attempt line already says (``dead #43 ...``)."""


class _CommandHandler(logging.Handler):
    """The app's WARNING and worse on the command's stderr, less what the console said."""

    def __init__(self, console: Console, err: Output) -> None:
        super().__init__(logging.WARNING)
        self.console = console
        self.err = err

    def emit(self, record: logging.LogRecord) -> None:
        event = str(record.msg).split(" ", 1)[0]
        if self.console.attempts and event in ATTEMPT_EVENTS:
            return
        try:
            self.err.write(self.format(record))
        except Exception:
            self.handleError(record)


@contextmanager
def command_logging(console: Console, err: Output) -> Iterator[None]:
    """While the command runs, and only when nothing receives the app's records, its warnings
    go to ``err`` once each instead of to Python's last-resort handler; undone at the end."""
    if logging_configured():
        yield
        return
    logger = logging.getLogger(LOGGER)
    handler = _CommandHandler(console, err)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _threads(worker: WorkerOptions) -> str:
    """``4 threads``, or with budgets ``12 threads (mail 10, reports 2)``."""
    if worker.budgets is None:
        return f"{worker.concurrency} threads"
    each = ", ".join(f"{name} {threads}" for name, threads in worker.budgets.items())
    return f"{worker.concurrency} threads ({each})"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def database_line(alias: str) -> str:
    """``default (postgresql, jobs on db.internal:5432)``: where the jobs are, never who logs
    in (no user, no password). Read from the settings: the database may be down at start."""
    settings = connections[alias].settings_dict
    where = str(settings.get("NAME") or "")
    host = str(settings.get("HOST") or "")
    if host:
        where += f" on {_servers(host, str(settings.get('PORT') or ''))}"
    return f"{alias} ({connections[alias].vendor}{', ' + where if where else ''})"


def _servers(host: str, port: str) -> str:
    """``db1:5432`` or, for libpq's multi-host form (``HOST = "db1,db2"`` with one port for
    all or one per host), ``db1:5432,db2:5432``: each host beside its own port."""
    hosts, ports = host.split(","), port.split(",") if port else []
    if len(hosts) > 1 and len(ports) in (1, len(hosts)):
        ports = ports * len(hosts) if len(ports) == 1 else ports
        return ",".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=True))
    return f"{host}:{port}" if port else host


class Console:
    """The command's lines for people; thread-safe (every pool thread reports through it).

    ``attempts`` says whether to write one line per finished attempt; by default, at
    verbosity 1 and up when the project configured no logging for the app's logger.
    """

    def __init__(self, out: Output, verbosity: int = 1, *, attempts: bool | None = None) -> None:
        self.out = out
        self.verbosity = verbosity
        if attempts is None:
            attempts = verbosity >= 1 and not logging_configured()
        self.attempts = attempts
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self.out.write(text)

    def banner(self, worker: WorkerOptions, *, burst: bool, version: str) -> None:
        """Who this worker is and what it serves; job names too at verbosity 2."""
        if self.verbosity < 1:
            return
        names = sorted(registry.registered())
        async_slots = (
            f"{worker.async_concurrency} async slots"
            if worker.async_enabled
            else "no async slots (no async handler)"
        )
        mode = "burst: runs what is due, then exits" if burst else "until stopped"
        if worker.max_jobs is not None:
            mode += f", at most {worker.max_jobs} jobs"
        lines = [
            f"django-leasejobs {version or '(version unknown)'}, worker {worker.worker_id}",
            f"  database:  {database_line(job_database())}",
            f"  queues:    {describe_queues(worker.queues)}",
            f"  jobs:      {len(names)} registered",
        ]
        if self.verbosity >= 2:
            lines += [f"    {name}" for name in names]
        lines += [
            f"  capacity:  {_threads(worker)}, {async_slots}",
            f"  lease:     {_seconds(worker.lease)}, heartbeat every "
            f"{_seconds(worker.heartbeat)}, polling every {_seconds(worker.poll)}",
            f"  scheduler: {'on' if worker.scheduler else 'off'}",
            f"  mode:      {mode}",
            "SIGTERM or Ctrl-C stops it gracefully; a second one exits at once.",
        ]
        self.write("\n".join(lines))

    def finished(
        self, job: Job, outcome: Outcome, duration: float, error: str = "", deferred: bool = False
    ) -> None:
        """One attempt's end: ``12:00:01 failed #43 shop.jobs.charge in 0.002 s, attempt 1
        of 3, retried later: ConnectionError: gateway timeout``. ``deferred``: a job released
        because this worker does not know its name (``error`` says why)."""
        if not self.attempts:
            return
        word = "deferred" if deferred else WORDS[outcome]
        text = f"{time.strftime('%H:%M:%S')} {word:<9} #{job.pk} {job.name} in {duration:.3f} s"
        if deferred:
            text += f": {error}"
        elif outcome in (Outcome.RETRIED, Outcome.DEAD):
            text += f", attempt {job.attempt} of {job.max_attempts}"
            if outcome is Outcome.RETRIED:
                text += ", retried later"
            if error:
                text += f": {error}"
        self.write(text)

    def stopping(self, reason: str, seconds: float, job_ids: Sequence[int]) -> None:
        """The first stop, at once: ``stopping (signal SIGTERM): waiting up to 30 s for 2
        running jobs (#41, #42), then releasing them; a second Ctrl-C exits now``."""
        if self.verbosity < 1:
            return
        shown = ", ".join(f"#{job_id}" for job_id in job_ids[:STOPPING_IDS])
        if len(job_ids) > STOPPING_IDS:
            shown += f" and {len(job_ids) - STOPPING_IDS} more"
        jobs = f"{len(job_ids)} running job{'s' if len(job_ids) != 1 else ''}"
        them = "them" if len(job_ids) != 1 else "it"
        grace = _seconds(round(seconds, 1))
        self.write(
            f"{time.strftime('%H:%M:%S')} stopping ({reason}): waiting up to {grace} "
            f"for {jobs} ({shown}), then releasing {them}; a second Ctrl-C (or SIGTERM) exits "
            f"now, leaving {them} to {'its lease' if them == 'it' else 'their leases'}"
        )

    def left_behind(self, left: Sequence[tuple[str, dialects.Count]], more: int) -> None:
        """After ``--burst``: the due jobs left in queues this worker does not serve."""
        if left:
            self.write(left_behind_line(left, more))


STOPPING_IDS = 10
"""Job ids the stopping line names; the rest are counted."""

WORDS = {
    Outcome.SUCCEEDED: "succeeded",
    Outcome.RETRIED: "failed",
    Outcome.DEAD: "dead",
    Outcome.RELEASED: "released",
    Outcome.SNOOZED: "snoozed",
    Outcome.CANCELLED: "cancelled",
    Outcome.STALE: "stale",
}
"""An attempt's end as the job's status says it (a retried attempt leaves the job ``failed``);
``stale``: the lease was lost and the result refused."""


def describe_queues(queues: Sequence[str] | None) -> str:
    return "every queue" if queues is None else ", ".join(queues)


def left_behind_line(left: Sequence[tuple[str, dialects.Count]], more: int) -> str:
    """``3 jobs due in queues this worker does not serve: emails (3)``; a count past the cap,
    or queues left out, make the total a lower bound."""
    total = sum(count.value for _, count in left)
    inexact = more > 0 or not all(count.exact for _, count in left)
    listed = ", ".join(f"{queue} ({count.text()})" for queue, count in left)
    if more:
        listed += f", and {more} more queue{'s' if more > 1 else ''}"
    jobs = f"{total:,}{'+' if inexact else ''} job{'s' if total != 1 or inexact else ''}"
    return f"{jobs} due in queues this worker does not serve: {listed}"


__all__ = [
    "Console",
    "command_logging",
    "describe_queues",
    "left_behind_line",
    "logging_configured",
]
