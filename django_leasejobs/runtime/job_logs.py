"""Each attempt's own logs: the records its handler emits through ``logging``, kept beside the job.

How a record reaches an attempt's buffer, without changing the project's logging:

* One :class:`Router` (a ``logging.Handler``) is on the root logger while an attempt is being
  captured in this process or a worker keeping logs runs (:class:`routing`: put on and taken
  off per attempt, it cost a drain of logging jobs, docs/benchmarks.md), and taken off when
  the last of them ends, so a process that runs no job never has it; an attempt puts it back
  if a logging reconfiguration took it off. It never formats, filters or stops a record: the
  project's own handlers see every record as they would without it.
* Around a handler's call, :class:`capturing` sets the context variable
  :data:`~django_leasejobs.core.job_log_context.CURRENT` and this module's capture in the
  handler's context: a sync handler's thread, an async handler's task (and what they start with
  a copy of their context: tasks, ``sync_to_async``). The router reads them; a record emitted
  anywhere else finds none and is ignored at once.
* A record reaches the root's handlers only if its logger's level lets it be made at all (the
  root's is ``WARNING`` unless the project's ``LOGGING`` says otherwise): this app changes no
  logger's level, so a project that wants INFO lines kept sets its loggers to INFO.
* While it is on the root, a record that no other handler takes (a project with no handler
  for it) still goes to ``logging.lastResort``, as Python would have sent it: the router's
  presence changes nothing of what is printed.
* The router also puts ``job_id``, ``job_name`` and ``attempt`` on the record; handlers that run
  before it (a child logger's, the root's earlier ones) see them through the
  :class:`~django_leasejobs.core.job_log_context.JobFields` filter, the project's choice. The
  record factory is never replaced: it is process-wide.

Caps: an attempt keeps its first and last records within ``ATTEMPT_CAP`` bytes (half each),
with a ``{"dropped": N}`` between them; a job keeps ``JOB_CAP`` bytes over all its attempts
(``upkeep/job_logs.py``). Memory stays bounded by the same caps while the handler runs.

Written with the attempt's end: by the runner that writes it (``report``), just after, or by
the grouped completions' flush, with the batch's completion: first attempts' rows in its own
statement on PostgreSQL (``protocol.complete_many(logs=)``), others in one insert inside the
transaction that completes it (``then=``), so a batch costs one commit with its logs too. An
attempt that no longer owns its job (lease lost, a write refused as stale) writes none: its
job may be another worker's, or gone. One the worker ended itself (a timeout, a cancel)
writes what its handler logged until it returned.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Iterable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from django.db import Error as DatabaseError

from .. import upkeep
from ..core.conf import settings
from ..core.job_log_context import CURRENT, Attempt, stamp
from ..protocol import Outcome

if TYPE_CHECKING:
    from .execution import Execution

logger = logging.getLogger("django_leasejobs")

ATTEMPT_CAP = 64 * 1024
"""Bytes of records one attempt keeps (its first half and its last half)."""
MESSAGE_CAP = 8 * 1024
"""Characters of one message kept; a longer one is cut, with a mark."""
OVERHEAD = 48
"""Bytes a record is counted beyond its message and logger name (its level, time, keys)."""

_FORMATTER = logging.Formatter()


Kept = tuple[str, str, str, float]
"""What a buffer holds of a record until its attempt's logs are written: level, logger,
message, time (``record.created``). The entry a job's logs show is made from it then."""


class Buffer:
    """One attempt's records. Its handler's thread, the threads and tasks it starts with its
    context, and the runner (after the handler returned) touch it, under ``_LOCK``.

    A record is kept as a tuple and its entry (a dict, its time in ISO 8601) made when the
    logs are written: a capture does as little as it can on the handler's thread, and a buffer
    is a few small objects with no lock of its own (every attempt makes one)."""

    __slots__ = ("dropped", "half", "head", "head_size", "level", "tail", "tail_size")

    def __init__(self, level: int, cap: int = ATTEMPT_CAP) -> None:
        self.level = level
        self.half = cap // 2
        self.head: list[Kept] = []
        self.tail: collections.deque[tuple[int, Kept]] | None = None
        """Made once the head is full: the last records, oldest dropped first."""
        self.head_size = 0
        self.tail_size = 0
        self.dropped = 0

    def add(self, record: logging.LogRecord) -> None:
        kept = kept_of(record)
        message = kept[2]
        length = len(message) if message.isascii() else len(message.encode(errors="replace"))
        size = OVERHEAD + length + len(kept[1])
        with _LOCK:
            if self.tail is None:
                if self.head_size + size <= self.half:
                    self.head.append(kept)
                    self.head_size += size
                    return
                self.tail = collections.deque()
            self.tail.append((size, kept))
            self.tail_size += size
            while self.tail_size > self.half and len(self.tail) > 1:
                dropped, _ = self.tail.popleft()
                self.tail_size -= dropped
                self.dropped += 1

    def records(self) -> tuple[list[dict[str, Any]], int]:
        """The records kept, with a ``{"dropped": N}`` where some were, and their size."""
        with _LOCK:
            head = list(self.head)
            tail = [kept for _, kept in self.tail] if self.tail else []
            dropped, size = self.dropped, self.head_size + self.tail_size
        middle = [{"dropped": dropped}] if dropped else []
        return [*map(entry_of, head), *middle, *map(entry_of, tail)], size


_LOCK = threading.Lock()
"""Held for a few appends to one buffer: one lock for all of them, none made per attempt."""


def kept_of(record: logging.LogRecord) -> Kept:
    """What is kept of a record: level, logger, message (its traceback too), time."""
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: the project's handlers report it; keep the text
        message = str(record.msg)
    if record.exc_info:
        message = f"{message}\n{_FORMATTER.formatException(record.exc_info)}"
    if len(message) > MESSAGE_CAP:
        message = f"{message[:MESSAGE_CAP]}… ({len(message) - MESSAGE_CAP} characters cut)"
    return (record.levelname, record.name, message, record.created)


def entry_of(kept: Kept) -> dict[str, Any]:
    """A kept record as a job's logs show it."""
    level, name, message, created = kept
    return {"level": level, "logger": name, "message": message, "at": iso_at(created)}


_SECOND: tuple[int, str] = (-1, "")
"""The last second :func:`iso_at` wrote, and its date and time."""


def iso_at(created: float) -> str:
    """A record's time in UTC as ``datetime.isoformat`` writes it, ``Z`` for ``+00:00``,
    rounded to the microsecond as ``datetime.fromtimestamp`` rounds it. The date and time of
    a second are made once: a flush's records mostly share one, and the datetime's own
    making and formatting were most of the cost of writing a record's entry."""
    global _SECOND
    fraction, whole = math.modf(created)
    second, micros = int(whole), round(fraction * 1e6)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    elif micros < 0:  # before 1970: the fraction is negative
        second, micros = second - 1, micros + 1_000_000
    cached, text = _SECOND
    if cached != second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _SECOND = (second, text)
    return f"{text}.{micros:06d}Z" if micros else f"{text}Z"


_CAPTURE: ContextVar[capturing | None] = ContextVar("django_leasejobs_job_logs", default=None)


class Router(logging.Handler):
    """Sends a record to the current attempt's buffer, if there is one (see the module)."""

    def handle(self, record: logging.LogRecord) -> bool:
        # No lock and no filters: the buffers have their own, and the record goes on as it came.
        last_resort(record)
        attempt = CURRENT.get()
        if attempt is None:
            return False
        stamp(record, attempt)
        capture = _CAPTURE.get()
        if capture is not None and record.levelno >= capture.level:
            capture.add(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover: handle() does it
        self.handle(record)


def alone(record: logging.LogRecord) -> bool:
    """Whether the router is the only handler the record met: then Python would have given it
    to ``logging.lastResort`` (WARNING and above to stderr, for a project with no handler for
    it), had the router not been there. One look at the root's handlers in a project that
    configured some."""
    root = logging.getLogger()
    if len(root.handlers) > 1:
        return False
    logger = logging.Logger.manager.loggerDict.get(record.name)
    current = logger if isinstance(logger, logging.Logger) else None
    while current is not None and current is not root:
        if current.handlers:
            return False
        if not current.propagate:
            return True  # pragma: no cover: the record would not have reached the root
        current = current.parent
    return True


def last_resort(record: logging.LogRecord) -> None:
    """What Python does with a record no handler took, which the router must not change. The
    level first: the last resort prints nothing below its own (an INFO line, most of a job's),
    and then whether the router is alone need not be looked at."""
    resort = logging.lastResort
    if resort is not None and record.levelno >= resort.level and alone(record):
        resort.handle(record)


ROUTER = Router()
_users = 0
_users_lock = threading.Lock()
_buffer_lock = threading.Lock()
"""Taken only to make an attempt's buffer: its handler's threads may log their first records
at once."""


def _attach() -> None:
    """One more attempt (or worker) needs the router; put it on the root if it is not there,
    as after a logging reconfiguration (``dictConfig`` with a root, ``basicConfig(force=True)``)
    took it off while a worker held it."""
    global _users
    with _users_lock:
        _users += 1
        root = logging.getLogger()
        if ROUTER not in root.handlers:
            root.addHandler(ROUTER)


def _detach() -> None:
    global _users
    with _users_lock:
        _users -= 1
        if _users == 0:
            logging.getLogger().removeHandler(ROUTER)


class routing:
    """While a worker runs with logs kept: the router stays on the root, so its attempts do not
    put it on and take it off each (the logging module's lock, taken by every thread of the
    pool in turn)."""

    __slots__ = ("held",)

    def __enter__(self) -> None:
        self.held = settings.JOB_LOGS is not None
        if self.held:
            _attach()

    def __exit__(self, *exc_info: object) -> None:
        if self.held:
            _detach()


class capturing:
    """Around a handler's call: its records go to its attempt's buffer (``context.logs``).

    The attempt's fields are set for the handler's records even when logs are off, so a
    project's format can print them. A class rather than a generator, and the buffer made at
    the first record kept: most jobs log nothing, and this runs once per attempt."""

    __slots__ = ("_attempt_token", "_capture_token", "context", "job", "keeping", "level")

    def __init__(self, execution: Execution) -> None:
        self.job, self.context = execution.job, execution.context
        level = settings.JOB_LOGS
        self.keeping = level is not None
        self.level = logging.NOTSET if level is None else level
        self._capture_token: Token[capturing | None] | None = None

    def __enter__(self) -> None:
        job = self.job
        self._attempt_token = CURRENT.set(Attempt(job.pk, job.name, job.attempt))
        if self.keeping:
            self._capture_token = _CAPTURE.set(self)
            _attach()

    def __exit__(self, *exc_info: object) -> None:
        if self._capture_token is not None:
            _detach()
            _CAPTURE.reset(self._capture_token)
        CURRENT.reset(self._attempt_token)

    def add(self, record: logging.LogRecord) -> None:
        """Keep a record at or above the level, in the buffer made at the first one."""
        buffer: Buffer | None = self.context.logs
        if buffer is None:
            with _buffer_lock:
                buffer = self.context.logs
                if buffer is None:
                    buffer = self.context.logs = Buffer(self.level)
        buffer.add(record)


def logged(execution: Execution | None) -> bool:
    """Whether this attempt kept any record (its logs have something to write)."""
    buffer = execution.context.logs if execution is not None else None
    return buffer is not None and bool(buffer.head or buffer.tail or buffer.dropped)


def owned(execution: Execution, outcome: Outcome) -> bool:
    """Whether the attempt still owned its job when its end was written: its logs are kept."""
    context = execution.context
    if context.lease_lost:
        return False
    return outcome is not Outcome.STALE or context.completed or context.cancelled


def rows_of(results: Iterable[tuple[Execution, Outcome]]) -> list[upkeep.AttemptLogs]:
    """The log rows of these ended attempts; those that no longer own their job have none."""
    rows: list[upkeep.AttemptLogs] = []
    for result, outcome in results:
        buffer: Buffer | None = result.context.logs
        if buffer is None or not owned(result, outcome):
            continue
        records, size = buffer.records()
        if records:
            rows.append(upkeep.AttemptLogs(result.job.pk, result.job.attempt, records, size))
    return rows


def uncapped(rows: list[upkeep.AttemptLogs]) -> bool:
    """Whether these rows need no job cap applied: all first attempts (an attempt keeps less
    than a job may), so they can be written with the completion's own statement."""
    return all(row.attempt == 1 for row in rows)


def keep(results: Iterable[tuple[Execution, Outcome]]) -> None:
    """Write the logs of these ended attempts, in one insert; those that no longer own their
    job are dropped. A database error loses them (logged): the attempt's end is written."""
    store(rows_of(results))


def store(rows: list[upkeep.AttemptLogs]) -> None:
    """Write these rows in one insert, within each job's cap; a database error loses them
    (logged)."""
    if not rows:
        return
    try:
        upkeep.store_logs(rows)
    except DatabaseError as exc:
        logger.warning("job.logs_lost count=%s error=%s", len(rows), exc)
