"""The worker: claims due jobs, runs them on a pool of threads, keeps their leases alive.

It changes job state only through :mod:`django_leasejobs.protocol` (claim, heartbeat, release,
recover_expired) and :mod:`.execution` (run a handler, report its result under its attempt
token). Its own job is timing and threads:

* The **main thread** claims a batch whenever threads are free, hands jobs to the pool, and every
  ``poll`` seconds runs maintenance: lease recovery (every worker does it; guarded statements make
  that safe) and, unless disabled, the scheduler.
* **Pool threads** run one handler each, outside any transaction, then report the result. A
  report that fails on a database error is retried with capped backoff: the write is guarded by
  the attempt token, so a late or repeated write can never overwrite a newer result.
* **One heartbeat thread** extends all in-flight leases in one ``protocol.heartbeat`` call. A job
  whose lease was lost gets its ``lease_lost`` event set; the worker never reports that attempt.

Database outages are logged and waited out with capped exponential backoff on every thread: no
busy loop, no thread dies. Shutdown (a signal, ``--max-jobs`` reached, or a drained ``--burst``)
stops claiming, lets in-flight jobs finish within ``grace`` seconds, and releases the rest so
another worker takes them at once.
"""

from __future__ import annotations

import logging
import math
import os
import queue as queue_module
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

from django.db import Error as DatabaseError
from django.db import connections

from .. import notify, protocol
from ..conf import settings
from ..models import Job
from ..protocol import Outcome
from . import execution, listener, schedules

logger = logging.getLogger("django_leasejobs")

BACKOFF_START = 0.25
"""Seconds to wait after the first database error; doubles on each error in a row."""

BACKOFF_CAP = 5.0
"""Longest wait between attempts to reach the database again."""

FORCED_EXIT_CODE = 1
"""Exit status after a second signal: nothing released, leases left to expire."""


def _headline(exc: BaseException) -> str:
    """A database error's first line, short enough for a log line (its type if it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def default_worker_id() -> str:
    """``host-pid-random``: unique per process start, so a restarted worker never inherits leases.

    Ownership follows the attempt token, not the name, but a fresh name also keeps logs and the
    admin's ``lease_owner`` column unambiguous.
    """
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


@dataclass
class Summary:
    """What one worker run reported, by outcome: the ``--burst`` summary table."""

    worker_id: str
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    stale: int = 0
    released: int = 0
    claimed: int = 0
    seconds: float = 0.0

    def count(self, outcome: Outcome) -> None:
        if outcome is Outcome.SUCCEEDED:
            self.succeeded += 1
        elif outcome is Outcome.RETRIED:
            self.retried += 1
        elif outcome is Outcome.DEAD:
            self.dead += 1
        elif outcome is Outcome.RELEASED:
            self.released += 1
        else:
            self.stale += 1

    @property
    def reported(self) -> int:
        return self.succeeded + self.retried + self.dead + self.stale + self.released

    def as_table(self) -> str:
        rows = [
            ("succeeded", self.succeeded),
            ("retried", self.retried),
            ("dead", self.dead),
            ("stale", self.stale),
            ("released", self.released),
            ("total", self.reported),
        ]
        lines = [f"{'outcome':<10} {'jobs':>8}"]
        lines += [f"{name:<10} {value:>8}" for name, value in rows]
        rate = self.reported / self.seconds if self.seconds > 0 else 0.0
        lines.append(f"worker {self.worker_id}: {self.seconds:.2f} s, {rate:.1f} jobs/s")
        return "\n".join(lines)


@dataclass(slots=True)
class _Slot:
    """One in-flight attempt and the flags the threads coordinate through."""

    job: Job
    lease_lost: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    duration: float = 0.0
    """Seconds the handler ran, for the log line of its outcome."""
    reporting: bool = False
    """Set (under ``Worker._gate``) when the handler has returned and its result is being
    written: the heartbeat stops renewing it and a shutdown no longer releases it."""
    released: bool = False
    """Set when shutdown handed the job back: the handler's result is then never reported."""

    @property
    def token(self) -> tuple[int, int]:
        return (self.job.pk, self.job.attempt)


def _positive(name: str, value: float | None, *, integer: bool = False) -> None:
    if value is None:
        return
    kind: type | tuple[type, ...] = int if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or not math.isfinite(value)
        or value <= 0
    ):
        wanted = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {wanted}, not {value!r}.")


class Worker:
    """Claims and runs jobs until stopped; usable in-process: ``Worker(...).run(burst=True)``.

    ``queues=None`` takes every queue. ``batch`` defaults to ``concurrency``; ``lease``,
    ``heartbeat`` and ``poll`` default to their ``LEASEJOBS_*`` settings. ``maintenance`` is a list
    of callables the scheduler step runs (see :meth:`_run_scheduler`).
    """

    def __init__(
        self,
        queues: Sequence[str] | None = None,
        *,
        concurrency: int = 4,
        batch: int | None = None,
        lease: float | None = None,
        heartbeat: float | None = None,
        poll: float | None = None,
        max_jobs: int | None = None,
        worker_id: str | None = None,
        scheduler: bool = True,
        grace: float = 30.0,
        maintenance: Sequence[Callable[[], object]] = (),
    ) -> None:
        if queues is not None:
            if isinstance(queues, str):
                raise ValueError("queues must be a list of queue names, not a string.")
            queues = list(queues)
            if not queues or not all(isinstance(q, str) and q.strip() for q in queues):
                raise ValueError(
                    f"queues must be a non-empty list of non-empty names, not {queues!r}."
                )
        _positive("concurrency", concurrency, integer=True)
        _positive("batch", batch, integer=True)
        _positive("lease", lease)
        _positive("heartbeat", heartbeat)
        _positive("poll", poll)
        _positive("max_jobs", max_jobs, integer=True)
        if (
            isinstance(grace, bool)
            or not isinstance(grace, int | float)
            or not math.isfinite(grace)
            or grace < 0
        ):
            raise ValueError(f"grace must be a number of seconds >= 0, not {grace!r}.")
        self.queues = queues
        self.concurrency = concurrency
        self.batch = batch or concurrency
        self.lease = float(lease if lease is not None else settings.LEASE_SECONDS)
        self.heartbeat = float(heartbeat if heartbeat is not None else settings.HEARTBEAT_SECONDS)
        self.poll = float(poll if poll is not None else settings.POLL_SECONDS)
        if self.heartbeat >= self.lease:
            raise ValueError(
                f"heartbeat ({self.heartbeat:g} s) must be shorter than the lease "
                f"({self.lease:g} s), or leases expire between renewals."
            )
        self.max_jobs = max_jobs
        if worker_id is not None and (not worker_id.strip() or len(worker_id) > 200):
            raise ValueError("worker_id must be a non-empty string of at most 200 characters.")
        self.worker_id = worker_id or default_worker_id()
        self.scheduler = scheduler
        self.grace = float(grace)
        self.maintenance: list[Callable[[], object]] = list(maintenance)

        self.summary = Summary(self.worker_id)
        self._summary_lock = threading.Lock()
        self._in_flight: dict[int, _Slot] = {}
        self._in_flight_lock = threading.Lock()
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
        # SimpleQueue: put and get in C, without Queue's Python-level condition variables (the
        # hand-off to a pool thread was a sixth of a no-op worker's time with Queue).
        self._work_queue: queue_module.SimpleQueue[_Slot | None] = queue_module.SimpleQueue()
        self._completions: list[_Slot] = []
        self._completions_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._listener: listener.Listener | None = None
        self._listener_thread: threading.Thread | None = None
        self._db_errors = 0
        self._next_maintenance = 0.0
        self._signals = 0

    # ------------------------------------------------------------------ public

    def run(self, burst: bool = False) -> Summary:
        """Run until stopped (or, with ``burst``, until nothing is due and nothing runs)."""
        started = time.monotonic()
        logger.info(
            "worker.started id=%s queues=%s concurrency=%s batch=%s lease=%g heartbeat=%g "
            "poll=%g burst=%s max_jobs=%s scheduler=%s grace=%g",
            self.worker_id,
            ",".join(self.queues) if self.queues is not None else "*",
            self.concurrency,
            self.batch,
            self.lease,
            self.heartbeat,
            self.poll,
            burst,
            self.max_jobs,
            self.scheduler,
            self.grace,
        )
        if self.scheduler:
            self._sync_schedules()
        self._start_threads()
        if not burst:
            self._start_listener()
        try:
            self._loop(burst)
        finally:
            self._shutdown()
            self.summary.seconds = time.monotonic() - started
            s = self.summary
            logger.info(
                "worker.stopped id=%s reason=%s claimed=%s succeeded=%s retried=%s dead=%s "
                "stale=%s released=%s seconds=%.2f",
                self.worker_id,
                self._stop_reason or "done",
                s.claimed,
                s.succeeded,
                s.retried,
                s.dead,
                s.stale,
                s.released,
                s.seconds,
            )
        return self.summary

    def stop(self, reason: str = "stop requested") -> None:
        """Stop claiming; in-flight jobs get ``grace`` seconds, then the rest is released."""
        if not self._stopping.is_set():
            self._stop_reason = reason
            self._stop_at = time.monotonic()
            logger.info(
                "worker.stopping id=%s reason=%s in_flight=%s grace=%g",
                self.worker_id,
                reason,
                len(self._in_flight),
                self.grace,
            )
        self._stopping.set()
        self._wake.set()

    def install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM/SIGINT: the first stops gracefully, a second exits at once.

        After a forced exit nothing is released: the leases simply expire and lease recovery on
        another worker takes the jobs again (as after a crash). Returns a function that puts the
        previous handlers back (for a worker run inside a longer-lived process). Signals can only
        be handled in the main thread; elsewhere this does nothing.
        """
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }

        def restore() -> None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        return restore

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # ------------------------------------------------------------------ main loop

    def _loop(self, burst: bool) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            execution.close_old_connections()
            if not self._maintain():
                continue
            try:
                self._flush_completions()
            except DatabaseError as exc:
                self._database_error("complete", exc)
                continue
            remaining = self._remaining()
            want = min(self.batch, self.concurrency - self.in_flight, remaining)
            claimed: list[Job] = []
            if want > 0:
                try:
                    claimed = protocol.claim(
                        self.worker_id,
                        queues=self.queues,
                        batch=want,
                        lease_seconds=self.lease,
                    )
                except DatabaseError as exc:
                    self._database_error("claim", exc)
                    continue
                self._db_errors = 0
                for job in claimed:
                    self._dispatch(job)
            if remaining == 0 and not self.in_flight:
                self._stop_reason = self._stop_reason or f"max_jobs={self.max_jobs} reached"
                return
            if burst and not claimed and not self.in_flight:
                self._stop_reason = self._stop_reason or "burst: nothing due"
                return
            if claimed and len(claimed) == want and self.in_flight < self.concurrency:
                continue  # more may be due: claim again at once
            self._wake.wait(self.poll)

    def _remaining(self) -> int:
        if self.max_jobs is None:
            return self.concurrency
        return max(0, self.max_jobs - self.summary.claimed)

    def _dispatch(self, job: Job) -> None:
        slot = _Slot(job)
        with self._in_flight_lock:
            self._in_flight[job.pk] = slot
        with self._summary_lock:
            self.summary.claimed += 1
        self._work_queue.put(slot)

    def _maintain(self) -> bool:
        """Every ``poll`` seconds: recover expired leases, run the scheduler. False on DB error."""
        now = time.monotonic()
        if now < self._next_maintenance:
            return True
        try:
            recovered = protocol.recover_expired()
            execution.recovered(recovered)  # task_finished for django.tasks tasks now dead
            if recovered:
                logger.info(
                    "worker.recovered id=%s jobs=%s", self.worker_id, ",".join(map(str, recovered))
                )
            if self.scheduler:
                self._run_scheduler()
        except DatabaseError as exc:
            self._database_error("maintenance", exc)
            return False
        self._next_maintenance = now + self.poll
        return True

    def _sync_schedules(self) -> None:
        """Bring ``LEASEJOBS_SCHEDULES`` into the database before the first tick.

        Invalid settings raise ``ScheduleError`` and stop the start: a worker that silently ran
        without its schedules is the failure this app exists to prevent. A database outage is
        logged and the start goes on; the next ``syncschedules`` or worker start syncs.
        """
        try:
            result = schedules.sync_from_settings()
        except DatabaseError as exc:
            self._database_error("schedule sync", exc)
            return
        logger.info("worker.schedules_synced id=%s %s", self.worker_id, result)

    def _run_scheduler(self) -> None:
        """The scheduler step, once per maintenance round (every ``poll`` s) when enabled.

        Emits due cron occurrences (``schedules.tick()``), then runs each callable of
        ``self.maintenance``. Emission is insert-or-ignore on a unique (schedule, occurrence) key
        with a compare-and-set on the schedule's cursor, so every worker may run it at once
        without double-firing.
        """
        emitted = schedules.tick()
        if emitted:
            logger.info("worker.scheduled id=%s jobs=%s", self.worker_id, emitted)
        for task in self.maintenance:
            try:
                task()
            except DatabaseError:
                raise  # waited out with backoff by the caller, like any database error
            except Exception:  # a broken schedule must not stop the worker running jobs
                logger.exception("worker.scheduler_error id=%s task=%r", self.worker_id, task)

    def _backoff(self) -> float:
        return float(min(BACKOFF_START * 2 ** max(self._db_errors - 1, 0), BACKOFF_CAP))

    def _database_error(self, where: str, exc: BaseException, wait: bool = True) -> None:
        """Log, drop the broken connection, and wait (capped backoff; a stop cuts it short)."""
        self._db_errors += 1
        delay = self._backoff()
        logger.warning(
            "worker.database_error id=%s where=%s retry_in=%.2f error=%s",
            self.worker_id,
            where,
            delay,
            _headline(exc),
        )
        execution.close_old_connections()
        if wait:
            self._stopping.wait(delay)

    # ------------------------------------------------------------------ threads

    def _start_threads(self) -> None:
        for index in range(self.concurrency):
            thread = threading.Thread(
                target=self._pool_thread, name=f"leasejobs-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat_loop, name="leasejobs-heartbeat", daemon=True
        )
        self._heartbeat_thread.start()

    def _start_listener(self) -> None:
        """PostgreSQL: LISTEN now (before the first idle wait) and wake the loop on NOTIFY.

        A notification only ends the idle wait early; the loop clears ``_wake`` before it
        claims, so one that lands between the claim and the wait is not lost either. Polling
        every ``poll`` seconds stays the fallback (a dropped LISTEN connection is reopened).
        """
        if not notify.supported():
            return
        self._listener = listener.Listener()
        self._listener.start()
        self._listener_thread = threading.Thread(
            target=self._listen_loop, name="leasejobs-listen", daemon=True
        )
        self._listener_thread.start()

    def _listen_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            queues = listener.wait(self.poll)
            if queues and (self.queues is None or not queues.isdisjoint(self.queues)):
                self._wake.set()

    def _stop_listener(self) -> None:
        if self._listener is None:
            return
        self._listener.wake()
        if self._listener_thread is not None:
            self._listener_thread.join(timeout=max(self.poll, 1.0))
        self._listener.close()

    def _pool_thread(self) -> None:
        # Daemon threads: after a grace period a handler that will not return must not keep
        # the process alive (its job has been released).
        try:
            while True:
                slot = self._work_queue.get()
                if slot is None:
                    return
                deferred = False
                try:
                    deferred = self._work(slot)
                except BaseException:  # a handler's KeyboardInterrupt must not kill the thread
                    # Unreported, the job's lease expires and lease recovery retries it.
                    logger.exception("worker.thread_error id=%s job=%s", self.worker_id, slot.token)
                finally:
                    if not deferred:
                        with self._in_flight_lock:
                            self._in_flight.pop(slot.job.pk, None)
                    self._wake.set()
        finally:
            connections.close_all()

    def _work(self, slot: _Slot) -> bool:
        """Run the handler and report it; True if its completion waits for the next flush."""
        if slot.released:
            return False
        began = time.monotonic()
        result = execution.execute(slot.job, self.worker_id, slot.lease_lost)
        slot.duration = time.monotonic() - began
        with self._gate, slot.lock:
            if slot.released:
                return False
            slot.reporting = True
        if self._groupable(result):
            with self._completions_lock:
                self._completions.append(slot)
            return True
        self._count(slot, self._report(result))
        return False

    def _count(self, slot: _Slot, outcome: Outcome) -> None:
        """Count an outcome in the summary and log its one line, with what an operator needs."""
        job = slot.job
        logger.log(
            logging.WARNING if outcome in (Outcome.DEAD, Outcome.STALE) else logging.INFO,
            "job.%s id=%s name=%s attempt=%s queue=%s duration=%.3fs worker=%s",
            outcome.value,
            job.pk,
            job.name,
            job.attempt,
            job.queue,
            slot.duration,
            self.worker_id,
        )
        with self._summary_lock:
            self.summary.count(outcome)

    @staticmethod
    def _groupable(result: execution.Execution) -> bool:
        """A plain success with no return value: its completion can share one statement.

        Not a ``django.tasks`` task: it reports through ``execution.report``, which sends its
        ``task_finished`` signal.
        """
        context = result.context
        return (
            result.ok
            and result.result is None
            and result.task is None
            and not context.completed
            and not context.lease_lost
        )

    def _flush_completions(self) -> None:
        """Complete every successful job waiting in one statement (each row fenced by its token).

        On a commit-bound database one statement for many jobs is much cheaper than one each;
        the slots stay in flight (and count against concurrency) until this has run.
        """
        with self._completions_lock:
            slots, self._completions = self._completions, []
        if not slots:
            return
        try:
            outcomes = protocol.complete_many(
                [slot.token for slot in slots], finished_by=self.worker_id
            )
        except DatabaseError:
            with self._completions_lock:
                self._completions[:0] = slots  # fenced writes: safe to try again
            raise
        for slot in slots:
            self._count(slot, outcomes.get(slot.job.pk, Outcome.STALE))
        with self._in_flight_lock:
            for slot in slots:
                self._in_flight.pop(slot.job.pk, None)

    def _report(self, result: execution.Execution) -> Outcome:
        """Write the result; on a database error retry with backoff (the write is fenced)."""
        delay = BACKOFF_START
        while True:
            try:
                return execution.report(result)
            except DatabaseError as exc:
                logger.warning(
                    "worker.database_error id=%s where=report job=%s retry_in=%.2f error=%s",
                    self.worker_id,
                    result.job.pk,
                    delay,
                    _headline(exc),
                )
                execution.close_old_connections()
                if self._abandon.wait(delay):
                    # Shutdown gave up: the lease expires and the job runs again elsewhere.
                    return Outcome.STALE
                delay = min(delay * 2, BACKOFF_CAP)

    def _heartbeat_loop(self) -> None:
        errors = 0
        try:
            while not self._heartbeat_stop.wait(self.heartbeat):
                try:
                    self._beat()
                    errors = 0
                except DatabaseError as exc:
                    errors += 1
                    logger.warning(
                        "worker.database_error id=%s where=heartbeat errors=%s error=%s",
                        self.worker_id,
                        errors,
                        _headline(exc),
                    )
                    execution.close_old_connections()
                except Exception:  # never lose the heartbeat thread
                    logger.exception("worker.heartbeat_error id=%s", self.worker_id)
        finally:
            connections.close_all()

    def _beat(self) -> None:
        with self._gate:
            with self._in_flight_lock:
                slots = [s for s in self._in_flight.values() if not (s.reporting or s.released)]
            if not slots:
                return
            execution.close_old_connections()
            lost = protocol.heartbeat(
                self.worker_id, [s.token for s in slots], lease_seconds=self.lease
            )
        for slot in slots:
            if slot.job.pk in lost:
                slot.lease_lost.set()

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        """Stop claiming, wait up to ``grace`` for in-flight jobs, release the rest, join."""
        self._stopping.set()
        deadline = (self._stop_at or time.monotonic()) + self.grace
        while self.in_flight and time.monotonic() < deadline:
            self._wake.clear()
            try:
                self._flush_completions()
            except DatabaseError as exc:
                # _stopping is set, so wait here, not in _database_error, and not past the grace.
                self._database_error("complete", exc, wait=False)
                time.sleep(min(self._backoff(), max(0.0, deadline - time.monotonic())))
            self._wake.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        self._stop_listener()
        self._release_left()
        self._abandon.set()
        self._heartbeat_stop.set()
        for _ in self._threads:
            self._work_queue.put(None)
        for thread in self._threads:
            thread.join(timeout=1.0)
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join(timeout=max(self.heartbeat, 1.0))
        execution.close_old_connections()

    def _release_left(self) -> None:
        with self._in_flight_lock:
            slots = list(self._in_flight.values())
        for slot in slots:
            with slot.lock:
                if slot.reporting or slot.released:
                    continue
                slot.released = True
            slot.lease_lost.set()  # a cooperative handler stops; its result is never written
            try:
                outcome = protocol.release(*slot.token)
            except DatabaseError as exc:
                logger.warning(
                    "worker.database_error id=%s where=release job=%s error=%s "
                    "(the lease will expire instead)",
                    self.worker_id,
                    slot.job.pk,
                    _headline(exc),
                )
                execution.close_old_connections()
                continue
            self._count(slot, outcome)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals > 1:
            logger.warning(
                "worker.forced_exit id=%s signal=%s in_flight=%s (leases will expire)",
                self.worker_id,
                name,
                self.in_flight,
            )
            sys.stderr.flush()
            os._exit(FORCED_EXIT_CODE)
        self.stop(f"signal {name}")


def parse_queues(text: str) -> list[str] | None:
    """``"a,b"`` -> ``["a", "b"]``; ``"*"`` -> ``None`` (every queue). Raises on an empty list."""
    if text.strip() == "*":
        return None
    names = [name.strip() for name in text.split(",")]
    if not any(names) or not all(names):
        raise ValueError(
            f"--queues needs comma-separated queue names (or '*' for all), not {text!r}."
        )
    return names


__all__ = ["Summary", "Worker", "default_worker_id", "parse_queues"]
