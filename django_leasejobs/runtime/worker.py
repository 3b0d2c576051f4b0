"""The worker: claims due jobs, runs them on a pool of threads, keeps their leases alive.

It changes job state only through :mod:`django_leasejobs.protocol` (claim, heartbeat, release,
recover_expired) and :mod:`.execution` (run a handler, write its result under its attempt
token). ``Worker`` builds its parts and wires them together; each owns its state and gets what
it needs by constructor, one module each:

* :mod:`.options`: the options, checked once (``WorkerOptions``, frozen).
* :mod:`.slots`: the in-flight slots (``InFlight``) and each ``Slot``'s state and its moves.
* :mod:`.ledger`: the run's summary, stuck handlers and runtime counts.
* :mod:`.control`: ``stop()``, the signal handlers, and the events every thread watches.
* :mod:`.loop`, the **main thread**: claims a batch whenever threads are free
  (:mod:`.claim_sizing`), hands jobs to an executor, and every ``poll`` seconds runs
  :mod:`.maintenance` (lease recovery, samples, pruning, the scheduler).
* :mod:`.pool`, the **pool threads**, and :mod:`.async_runner`, **one event-loop thread** (when
  the process has ``async def`` handlers) with two writer threads: the two executors. Both
  write through :mod:`.result_writing`; :mod:`.completions` groups plain successes into one
  statement.
* :mod:`.heartbeat`, **one heartbeat thread**: extends all in-flight leases in one call and
  sets ``lease_lost`` on a job whose lease was lost; the worker never writes that attempt's end.
* :mod:`.watchdog`, **one watchdog thread**: ends attempts past their timeout or cancelled by
  an operator (``ctx.cancelled``, a fenced write), and counts handlers that will not return
  as stuck (``max_stuck`` of them stop the worker).
* :mod:`.wakeup`: on PostgreSQL, a NOTIFY ends the main thread's idle wait early.
* :mod:`.shutdown`: grace, release, join.

Database outages are logged and waited out with capped exponential backoff on every thread
(:mod:`.outage`): no busy loop, no thread dies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..models.databases import using_database
from ..reports import queue_gauges
from ..reports.summary import Summary
from . import job_logs
from .async_runner import AsyncPool
from .claim_sizing import ClaimRoom, ClaimSizer
from .completions import Completer
from .connection_keeper import ConnectionKeeper
from .console import Console
from .control import Control
from .heartbeat import Heartbeat
from .ledger import Ledger
from .loop import ClaimLoop
from .maintenance import Maintenance
from .options import (
    DEFAULT_BATCH,
    DEFAULT_CONCURRENCY,
    WorkerOptions,
    default_worker_id,
    parse_queues,
)
from .outage import Outage
from .pool import ThreadPool
from .result_writing import ResultWriter
from .shutdown import Shutdown
from .slots import InFlight, Lane, Slot
from .wakeup import Wakeup
from .watchdog import Watchdog

logger = logging.getLogger("django_leasejobs")


class Worker:
    """Claims and runs jobs until stopped; usable in-process: ``Worker(...).run(burst=True)``.

    ``queues=None`` takes every queue. ``concurrency`` threads (4) run sync handlers for all of
    them, or ``queues={"mail": 10, "reports": 2}`` gives each queue its own threads (a busy
    queue cannot take another's; ``concurrency`` is not given then). Up to
    ``async_concurrency`` ``async def`` handlers run on one event loop. ``batch`` (most jobs
    per claim, and the prefetch's cap) defaults to ``max(capacity, 100)``; ``lease``,
    ``heartbeat`` and ``poll`` default to their ``LEASEJOBS_*`` settings. ``maintenance`` is a list
    of callables the scheduler step runs (see :mod:`.maintenance`). ``max_stuck=N``
    stops the worker gracefully once N handlers are stuck (``stuck_limit_reached`` then says so).
    ``console`` gets one line per finished attempt (``runjobworker`` passes its own).

    The options, checked, are ``worker.options`` (``worker.options.worker_id``, ``.queues``,
    ``.batch``, ...); ``summary`` and ``stuck_limit_reached`` say how the run went. The parts
    (``slots``, ``ledger``, ``control``, ``loop``, ...) are built and wired by ``_parts``.
    """

    def __init__(
        self,
        queues: Sequence[str] | Mapping[str, int] | None = None,
        *,
        concurrency: int | None = None,
        async_concurrency: int = 100,
        batch: int | None = None,
        lease: float | None = None,
        heartbeat: float | None = None,
        poll: float | None = None,
        max_jobs: int | None = None,
        worker_id: str | None = None,
        scheduler: bool = True,
        grace: float = 30.0,
        maintenance: Sequence[Callable[[], object]] = (),
        max_stuck: int | None = None,
        console: Console | None = None,
        database: str | None = None,
    ) -> None:
        self.options = options = WorkerOptions.build(
            queues,
            concurrency=concurrency,
            async_concurrency=async_concurrency,
            batch=batch,
            lease=lease,
            heartbeat=heartbeat,
            poll=poll,
            max_jobs=max_jobs,
            worker_id=worker_id,
            scheduler=scheduler,
            grace=grace,
            max_stuck=max_stuck,
            database=database,
        )
        with using_database(options.database):
            parts = _parts(options, maintenance, console)
        self.connection_keeper = parts.connection_keeper
        """Keeps the threads' connections between jobs, whatever ``CONN_MAX_AGE`` says."""
        self.slots = parts.slots
        self.ledger = parts.ledger
        self.control = parts.control
        self.watchdog = parts.watchdog
        self.pool = parts.pool
        self.async_pool = parts.async_pool
        self.heartbeat_thread = parts.heartbeat_thread
        self.wakeup = parts.wakeup
        self.loop = parts.loop
        self.shutdown = parts.shutdown

    def run(self, burst: bool = False) -> Summary:
        """Run until stopped (or, with ``burst``, until nothing is due and nothing runs)."""
        # The claim loop runs on the caller's thread, in the queue database it serves; the
        # threads it starts work there too (runtime.threads).
        with (
            using_database(self.options.database),
            self.connection_keeper.adopted(),
            job_logs.routing(),
        ):
            return self._run(burst)

    def stop(self, reason: str = "stop requested", *, grace: float | None = None) -> None:
        """Stop claiming; in-flight jobs get ``grace`` seconds, then the rest is released.

        ``grace`` overrides the worker's own for this stop: ``0`` releases every in-flight job
        at once (``runjobworker --reload`` does so when code changes). Safe from any thread.
        """
        self.control.stop(reason, grace=grace)

    def install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM/SIGINT: the first stops gracefully, a second exits at once (see
        :meth:`.Control.install_signal_handlers`); returns a function that restores the
        previous handlers."""
        return self.control.install_signal_handlers()

    @property
    def summary(self) -> Summary:
        """The run's counts (complete once ``run`` returned)."""
        return self.ledger.summary

    @property
    def stuck_limit_reached(self) -> bool:
        """``max_stuck`` stuck threads were reached and the worker stopped for it."""
        return self.watchdog.stuck_limit_reached

    def _run(self, burst: bool) -> Summary:
        options = self.options
        started = time.monotonic()
        logger.info(
            "worker.started id=%s queues=%s concurrency=%s async_concurrency=%s batch=%s "
            "lease=%g heartbeat=%g poll=%g burst=%s max_jobs=%s scheduler=%s grace=%g "
            "max_stuck=%s",
            options.worker_id,
            options.queues_text,
            options.concurrency,
            options.async_slots,
            options.batch,
            options.lease,
            options.heartbeat,
            options.poll,
            burst,
            options.max_jobs,
            options.scheduler,
            self.control.grace,
            options.max_stuck,
        )
        if options.scheduler:
            self.loop.maintenance.sync_schedules()
        self.pool.start()
        self.async_pool.start()
        self.heartbeat_thread.start()
        self.watchdog.start()
        if not burst:
            self.wakeup.start()
            queue_gauges.observe()  # once per process; read when the project's reader collects
        try:
            self.loop.run(burst)
        finally:
            self.shutdown.run()
            self.ledger.flush_runtimes()  # what the last beat did not write
            self.loop.maintenance.give_up_retention_lease()
            self.summary.seconds = time.monotonic() - started
            self._log_stopped()
        return self.summary

    def _log_stopped(self) -> None:
        s = self.summary
        logger.info(
            "worker.stopped id=%s reason=%s claimed=%s succeeded=%s retried=%s dead=%s "
            "stale=%s released=%s snoozed=%s cancelled=%s timed_out=%s stuck=%s seconds=%.2f",
            self.options.worker_id,
            self.control.reason or "done",
            s.claimed,
            s.succeeded,
            s.retried,
            s.dead,
            s.stale,
            s.released,
            s.snoozed,
            s.cancelled,
            s.timed_out,
            s.stuck,
            s.seconds,
        )


@dataclass(frozen=True, slots=True)
class _Parts:
    """A worker's parts, wired to each other; ``Worker`` keeps each as an attribute."""

    connection_keeper: ConnectionKeeper
    slots: InFlight
    ledger: Ledger
    control: Control
    watchdog: Watchdog
    pool: ThreadPool
    async_pool: AsyncPool
    heartbeat_thread: Heartbeat
    wakeup: Wakeup
    loop: ClaimLoop
    shutdown: Shutdown


def _parts(
    options: WorkerOptions, tasks: Sequence[Callable[[], object]], console: Console | None
) -> _Parts:
    """Build every part from the options, each given by constructor what it may touch."""
    worker_id = options.worker_id
    keeper = ConnectionKeeper()
    slots = InFlight()
    ledger = Ledger(worker_id, options.lease, options.heartbeat, console)
    control = Control(worker_id, options.grace, slots)
    outage = Outage(worker_id, control.stopping)
    lanes = _lanes(options)
    completer = Completer(worker_id, slots, ledger)
    room = ClaimRoom(lanes, slots, completer, options.async_slots)

    def cancel_async(slot: Slot) -> bool:
        """The watchdog's way to the event loop (built after it): cancel an async handler."""
        return async_pool.cancel(slot)

    watchdog = Watchdog(
        options=options,
        slots=slots,
        ledger=ledger,
        keeper=keeper,
        stop=control.stop,
        cancel_async=cancel_async,
    )
    writer = ResultWriter(
        worker_id=worker_id,
        slots=slots,
        completer=completer,
        ledger=ledger,
        watchdog=watchdog,
        abandon=control.abandon,
    )
    pool = ThreadPool(
        worker_id=worker_id,
        lanes=lanes,
        keeper=keeper,
        writer=writer,
        watchdog=watchdog,
        room=room,
        wake=control.wake,
    )
    async_pool = AsyncPool(
        worker_id=worker_id,
        async_slots=options.async_slots,
        keeper=keeper,
        writer=writer,
        watchdog=watchdog,
        wake=control.wake,
    )
    heartbeat = Heartbeat(
        options=options,
        slots=slots,
        ledger=ledger,
        keeper=keeper,
        request_cancel=watchdog.request_cancel,
    )
    wakeup = Wakeup(
        queues=options.queues,
        poll=options.poll,
        wake=control.wake,
        stopping=control.stopping,
        request_cancel=watchdog.request_cancel,
    )
    loop = ClaimLoop(
        options=options,
        room=room,
        slots=slots,
        ledger=ledger,
        completer=completer,
        control=control,
        outage=outage,
        maintenance=Maintenance(options=options, tasks=tasks, ledger=ledger, outage=outage),
        pool=pool,
        async_pool=async_pool,
    )
    shutdown = Shutdown(
        control=control,
        slots=slots,
        lanes=lanes,
        completer=completer,
        ledger=ledger,
        outage=outage,
        wakeup=wakeup,
        watchdog=watchdog,
        pool=pool,
        async_pool=async_pool,
        heartbeat=heartbeat,
    )
    # Positional: each field has its own type, so mypy catches a swap.
    return _Parts(
        keeper,
        slots,
        ledger,
        control,
        watchdog,
        pool,
        async_pool,
        heartbeat,
        wakeup,
        loop,
        shutdown,
    )


def _lanes(options: WorkerOptions) -> list[Lane]:
    """One lane for every queue, or one per queue with a thread budget (see :class:`Lane`)."""
    if options.budgets is None:
        return [
            Lane(
                options.queues, options.concurrency, ClaimSizer(options.concurrency, options.batch)
            )
        ]
    return [
        Lane([name], threads, ClaimSizer(threads, options.batch))
        for name, threads in options.budgets.items()
    ]


__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_CONCURRENCY",
    "Summary",
    "Worker",
    "default_worker_id",
    "parse_queues",
]
