"""What the worker's threads share: the in-flight slots, and the locks and events between them.

:class:`~django_leasejobs.runtime.worker.Worker` is assembled from one class per job a thread
does (the claim loop, the pool, grouped completions, the heartbeat, the LISTEN wake-up,
shutdown). They all read and write the state declared and created here, so each of those
modules can be read alone against this one.
"""

from __future__ import annotations

import logging
import queue as queue_module
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.backoff import Backoff
from ..models import Job
from ..protocol import Outcome
from ..reports import samples
from ..reports.summary import Summary
from ..upkeep.retention import Retention
from . import execution, listener
from .claim_sizing import ClaimSizer
from .connection_keeper import ConnectionKeeper
from .console import Console
from .context import TIMEOUT, Cancellation
from .execution import Execution
from .runtime_tally import Tally

logger = logging.getLogger("django_leasejobs")

BACKOFF_START = 0.25
"""Seconds to wait after the first database error; doubles on each error in a row."""

BACKOFF_CAP = 5.0
"""Longest wait between attempts to reach the database again."""

RECONNECT = Backoff(base=BACKOFF_START, cap=BACKOFF_CAP, jitter="none")
"""The wait before the next try after ``n`` database errors in a row, for every thread."""


def headline(exc: BaseException) -> str:
    """A database error's first line, short enough for a log line (its type if it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


@dataclass(eq=False)
class Lane:
    """Queues and the pool threads that serve them, with their own claims.

    A worker has one lane for all its queues (``--queues a,b``: one shared pool), or one per
    queue when each has a thread budget (``--queues mail:10,reports:2``): a lane claims only
    for its own free threads, so a queue full of slow jobs cannot take another's threads.
    """

    queues: list[str] | None
    threads: int
    sizer: ClaimSizer
    work: queue_module.SimpleQueue[Slot | None] = field(default_factory=queue_module.SimpleQueue)
    """Claimed slots for this lane's threads. SimpleQueue: put and get in C, without Queue's
    Python-level condition variables, on the path every job takes to a pool thread."""

    @property
    def name(self) -> str:
        return ",".join(self.queues) if self.queues is not None else "*"


@dataclass(slots=True)
class Slot:
    """One in-flight attempt and the flags the threads coordinate through."""

    job: Job
    lane: Lane | None = None
    """The lane whose claim took it, whose threads run it (``None``: the worker's first)."""
    lease_lost: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    duration: float = 0.0
    """Seconds the handler ran, for the log line of its outcome."""
    reporting: bool = False
    """Set (under ``Worker._gate``) when the handler has returned and its result is being
    written: the heartbeat stops renewing it and a shutdown no longer releases it."""
    released: bool = False
    """Set when shutdown handed the job back: the handler's result is then never reported."""
    started: bool = False
    """Set when a pool thread takes the slot: until then it is a prefetched job, released at
    once by a shutdown."""
    execution: execution.Execution | None = None
    """The handler's success, while it waits in the grouped completions."""
    is_async: bool = False
    """An ``async def`` handler: it runs on the worker's event loop, not a pool thread."""
    cancel_handler: Callable[[], object] | None = None
    """Cancels an async handler's task; call it on the event loop (``Worker._cancel_async``)."""
    cancellation: Cancellation = field(default_factory=Cancellation)
    """The handler's ``ctx.cancelled``: set when the worker ends the attempt under it."""
    handled: Execution | None = None
    """The running handler's execution, once it started: the watchdog's write needs it (a
    task's backoff and ``task_finished``)."""
    timeout: float | None = None
    handler_started: float | None = None
    """``time.monotonic()`` when the handler was called."""
    deadline: float | None = None
    """``time.monotonic()`` at which the handler times out; None: no timeout, or not started."""
    ended_at: float | None = None
    """Set (under ``lock``) when the worker ended the attempt (timeout or cancel) while the
    handler still ran: its token is spent, it is no longer renewed or released, and its
    thread still counts against ``concurrency`` until the handler returns."""
    end_reason: str = ""
    end_written: bool = False
    """The end of the attempt is in the database (a write that failed is tried again)."""
    returned: bool = False
    """The handler returned (its pool thread is free); set under ``lock``."""
    stuck: bool = False
    """The handler still ran one heartbeat interval after its attempt was ended."""

    @property
    def token(self) -> tuple[int, int]:
        return (self.job.pk, self.job.attempt)

    @property
    def result(self) -> Any:
        return self.execution.result if self.execution is not None else None


def _error_of(slot: Slot) -> str:
    """Why the attempt failed, in one line, when the worker knows it (for the console)."""
    if slot.end_reason == TIMEOUT:
        return f"timed out after {slot.timeout or 0:g} s"
    handled = slot.handled or slot.execution
    failure = handled.failure if handled is not None else None
    return failure.headline if failure is not None else ""


WORKER_LINES = (Outcome.SUCCEEDED, Outcome.RELEASED, Outcome.SNOOZED)
"""Outcomes whose log line the worker writes (one line per state change): it knows their name,
queue and duration without a query (a snooze's write logs nothing of its own). The protocol
writes its own line for a retry, a timeout, a
dead letter, a cancel and a refused (stale) write, as it alone knows the error and the reason."""


class WorkerState:
    """The options every part reads and the state the threads share (see the module docstring)."""

    queues: list[str] | None
    budgets: dict[str, int] | None
    """Threads per queue (``--queues mail:10,reports:2``), or ``None``: one shared pool."""
    concurrency: int
    batch: int
    lease: float
    heartbeat: float
    poll: float
    max_jobs: int | None
    worker_id: str
    scheduler: bool
    grace: float
    max_stuck: int | None
    async_concurrency: int
    _async_enabled: bool
    """Whether this process can meet async handlers (see ``async_execution.possible``)."""
    console: Console | None
    """Where people read one line per finished attempt (``runjobworker``'s stdout)."""

    def _init_state(self) -> None:
        """Create the shared state; ``Worker.__init__`` calls it once the options are set."""
        self.summary = Summary(self.worker_id)
        self.runtimes = Tally()
        """Runtimes, stale reports and recovered expiries per job name, until the next flush."""
        if self.budgets is None:
            sizer = ClaimSizer(self.concurrency, self.batch)
            self._lanes = [Lane(self.queues, self.concurrency, sizer)]
        else:
            self._lanes = [
                Lane([name], threads, ClaimSizer(threads, self.batch))
                for name, threads in self.budgets.items()
            ]
        self._sizer = self._lanes[0].sizer
        """The first lane's (the only one without budgets)."""
        self._summary_lock = threading.Lock()
        self._in_flight: dict[int, Slot] = {}
        self._ended: dict[tuple[int, int], Slot] = {}
        """Slots whose attempt the worker ended under a handler still running (timeout,
        cancel), by token: the job may already run again here under a newer attempt. Under
        ``_in_flight_lock``, like ``_in_flight``."""
        self._in_flight_lock = threading.Lock()
        self._async_recent = False
        """Whether the latest claim that took jobs brought an async one (see ``_claim_room``)."""
        self._async_in_flight = 0
        """How many slots of ``_in_flight`` are async, under ``_in_flight_lock``."""
        self._gate = threading.Lock()
        """Held by the heartbeat around its snapshot and statement, and briefly by a pool thread
        to mark its slot ``reporting``: a job that has just been completed is never heartbeated
        (which would misread it as a lost lease)."""
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stop_reason = ""
        self._stop_at: float | None = None
        self._abandon = threading.Event()
        """Set when shutdown gives up on in-flight work: report retries stop."""
        self._completions: list[Slot] = []
        self._completions_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._row_written = False
        """The heartbeat tried to write the worker's row: at a clean stop it deletes it."""
        self._listener: listener.Listener | None = None
        self._listener_thread: threading.Thread | None = None
        self._db_errors = 0
        self._next_maintenance = 0.0
        self._sampler = samples.Sampler()
        """When maintenance next writes the dashboard's per-minute sample (if no worker did)."""
        self._next_worker_prune = 0.0
        self._retention = Retention(self.worker_id)
        """Pruning by ``LEASEJOBS_RETENTION`` when this worker holds the retention lease."""
        self._signals = 0
        self._watch_wake = threading.Event()
        """Wakes the watchdog at once: a handler with a timeout started, a cancel arrived."""
        self._watch_stop = threading.Event()
        self._watch_next = 0.0
        """``time.monotonic()`` of the watchdog's next pass: a deadline before it wakes it."""
        self._watchdog_thread: threading.Thread | None = None
        self._cancel_requests: set[int] = set()
        """Job ids an operator asked to cancel (heartbeat, NOTIFY); the watchdog acts on them."""
        self._cancel_lock = threading.Lock()
        self._stuck: set[int] = set()
        """Job ids whose handler is stuck now (the thread still runs); under _summary_lock."""
        self.stuck_limit_reached = False
        """``max_stuck`` stuck threads were reached and the worker stopped for it."""
        self.connection_keeper = ConnectionKeeper()
        """Keeps the threads' connections between jobs, whatever ``CONN_MAX_AGE`` says."""

    @property
    def in_flight(self) -> int:
        """Slots holding a pool thread, stuck ones included: the capacity they take is real."""
        return len(self._in_flight) + len(self._ended)

    @property
    def running(self) -> int:
        """In-flight attempts the worker still has to report (not ended under their handler)."""
        return len(self._in_flight)

    def _held(self, lane: Lane | None = None) -> int:
        """Jobs claimed and not finished: running or waiting to start (not those whose
        completion only waits for the next flush), and handlers still running after the
        worker ended their attempt (a stuck thread is not free); of ``lane`` alone when the
        worker has several (``None``: all of them)."""
        if lane is None or len(self._lanes) == 1:
            return len(self._in_flight) - len(self._completions) + len(self._ended)
        with self._in_flight_lock:
            held = sum(1 for slot in self._in_flight.values() if slot.lane is lane)
            held += sum(1 for slot in self._ended.values() if slot.lane is lane)
        with self._completions_lock:
            return held - sum(1 for slot in self._completions if slot.lane is lane)

    def _lane_of(self, slot: Slot) -> Lane:
        return slot.lane or self._lanes[0]

    def _claim_room(self, lane: Lane | None = None) -> int:
        """How many jobs the next claim may take (0 while below the low mark).

        The pool's threads plus the prefetch of :mod:`.claim_sizing`, plus the async slots
        while the latest claim brought async jobs. A claim cannot tell which kind a due job is:
        counting the async slots always would let a worker of a project that has any async
        handler sit on a hundred long sync jobs its threads cannot start. The first async job
        a claim brings opens them; a claim of sync jobs alone closes them, leaving room for one
        job more than the threads, so async work is still found while every thread is busy.
        Jobs beyond the free threads or ``async_concurrency`` wait, in flight, their leases
        renewed by the heartbeat. While a handler whose attempt the worker ended still holds a
        thread, that one job more is not taken: a sync job could wait behind a thread that may
        never free, its lease renewed, when another worker could run it. With thread budgets
        each lane is sized alone (``lane``; ``None``: the first).
        """
        lane = lane or self._lanes[0]
        extra = 0
        if self._async_enabled:
            extra = self.async_concurrency if self._async_recent else int(not self._ended)
        return lane.sizer.wanted(self._held(lane), extra)

    def _any_claim_room(self) -> bool:
        return any(self._claim_room(lane) for lane in self._lanes)

    def _hand_over(self, slot: Slot) -> None:
        """Queue a claimed slot (already in flight) for its lane's threads; async slots are
        routed to the event loop by ``AsyncRunner``, which overrides this."""
        self._lane_of(slot).work.put(slot)

    def _stop_async(self) -> None:
        """Stop the event loop at shutdown; ``AsyncRunner`` overrides this (nothing to stop
        here)."""

    def _forget(self, slots: list[Slot]) -> None:
        """Take finished (or released) slots out of flight: the one place a slot leaves."""
        with self._in_flight_lock:
            for slot in slots:
                if self._in_flight.pop(slot.job.pk, None) is not None and slot.is_async:
                    self._async_in_flight -= 1

    def _request_cancel(self, job_ids: set[int]) -> None:
        """Hand cancel requests to the watchdog (from the heartbeat or the LISTEN thread)."""
        if job_ids:
            with self._cancel_lock:
                self._cancel_requests |= job_ids
            self._watch_wake.set()

    def _count(self, slot: Slot, outcome: Outcome) -> None:
        """Count an outcome in the summary and, unless the protocol wrote it, log its one line."""
        job = slot.job
        if outcome in WORKER_LINES:
            logger.info(
                "job.%s id=%s name=%s attempt=%s queue=%s duration=%.3fs worker=%s",
                outcome.value,
                job.pk,
                job.name,
                job.attempt,
                job.queue,
                slot.duration,
                self.worker_id,
            )
        if self.console is not None:
            self.console.finished(job, outcome, slot.duration, _error_of(slot))
        with self._summary_lock:
            self.summary.count(outcome)
        lease = job.lease_seconds or self.lease
        self.runtimes.outcome(job.name, slot.duration, outcome, ran=not slot.released, lease=lease)

    def _backoff(self) -> float:
        return RECONNECT.ceiling(self._db_errors)

    def _database_error(self, where: str, exc: BaseException, wait: bool = True) -> None:
        """Log, drop the broken connection, and wait (capped backoff; a stop cuts it short)."""
        self._db_errors += 1
        delay = self._backoff()
        logger.warning(
            "worker.database_error id=%s where=%s retry_in=%.2f error=%s",
            self.worker_id,
            where,
            delay,
            headline(exc),
        )
        execution.close_old_connections()
        if wait:
            self._stopping.wait(delay)
