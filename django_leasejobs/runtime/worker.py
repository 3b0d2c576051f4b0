"""The worker: claims due jobs, runs them on a pool of threads, keeps their leases alive.

It changes job state only through :mod:`django_leasejobs.protocol` (claim, heartbeat, release,
recover_expired) and :mod:`.execution` (run a handler, report its result under its attempt
token). Its own job is timing and threads, one module each:

* :mod:`.loop`, the **main thread**: claims a batch whenever threads are free, hands jobs to
  the pool, and every ``poll`` seconds recovers expired leases, runs the scheduler and
  (:mod:`.retention`) prunes finished jobs by ``LEASEJOBS_RETENTION``.
* :mod:`.pool`, the **pool threads**: run one handler each, outside any transaction, then
  report the result; :mod:`.completions` groups plain successes into one statement.
* :mod:`.async_runner`, **one event-loop thread** (when the process has ``async def``
  handlers): runs up to ``async_concurrency`` of them at once; two reporter threads report them.
* :mod:`.heartbeat`, **one heartbeat thread**: extends all in-flight leases in one call and
  sets ``lease_lost`` on a job whose lease was lost; the worker never reports that attempt.
* :mod:`.watchdog`, **one watchdog thread**: ends attempts past their timeout or cancelled by
  an operator (``ctx.cancelled``, a fenced write), and counts handlers that will not return
  as stuck (``max_stuck`` of them stop the worker).
* :mod:`.wakeup`: on PostgreSQL, a NOTIFY ends the main thread's idle wait early.
* :mod:`.shutdown`: stop, grace, release, and the signal handlers.

:mod:`.worker_state` holds what they share. Database outages are logged and waited out with
capped exponential backoff on every thread: no busy loop, no thread dies.
"""

from __future__ import annotations

import logging
import math
import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence

from ..core.conf import settings
from ..reports.summary import Summary
from . import async_execution
from .async_runner import AsyncRunner
from .console import Console
from .heartbeat import HeartbeatThread
from .loop import ClaimLoop
from .shutdown import Shutdown

logger = logging.getLogger("django_leasejobs")

DEFAULT_CONCURRENCY = 4
"""Threads running sync handlers, shared by every queue, unless queues have their own."""

DEFAULT_BATCH = 100
"""Most jobs one claim takes, and most a worker prefetches, unless ``batch`` is given."""


def default_worker_id() -> str:
    """``host-pid-random``: unique per process start, so a restarted worker never inherits leases.

    Ownership follows the attempt token, not the name, but a fresh name also keeps logs and the
    admin's ``lease_owner`` column unambiguous.
    """
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


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


def _checked_budgets(queues: Mapping[str, int]) -> dict[str, int]:
    """Queue names and their threads: each a positive integer."""
    budgets = dict(queues)
    if not budgets:
        raise ValueError("queues must name at least one queue.")
    for name, threads in budgets.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"queues must be non-empty names, not {name!r}.")
        _positive(f"the threads of queue {name!r}", threads, integer=True)
    return budgets


def _checked_queues(queues: Sequence[str] | None) -> list[str] | None:
    """A list of non-empty names, or ``None`` (every queue); a bare string is refused."""
    if queues is None:
        return None
    if isinstance(queues, str):
        raise ValueError("queues must be a list of queue names, not a string.")
    names = list(queues)
    if not names or not all(isinstance(q, str) and q.strip() for q in names):
        raise ValueError(f"queues must be a non-empty list of non-empty names, not {names!r}.")
    return names


def _check_grace(grace: float) -> None:
    if (
        isinstance(grace, bool)
        or not isinstance(grace, int | float)
        or not math.isfinite(grace)
        or grace < 0
    ):
        raise ValueError(f"grace must be a number of seconds >= 0, not {grace!r}.")


class Worker(ClaimLoop, AsyncRunner, HeartbeatThread, Shutdown):
    """Claims and runs jobs until stopped; usable in-process: ``Worker(...).run(burst=True)``.

    ``queues=None`` takes every queue. ``concurrency`` threads (4) run sync handlers for all of
    them, or ``queues={"mail": 10, "reports": 2}`` gives each queue its own threads (a busy
    queue cannot take another's; ``concurrency`` is not given then). Up to
    ``async_concurrency`` ``async def`` handlers run on one event loop. ``batch`` (most jobs
    per claim, and the prefetch's cap) defaults to ``max(capacity, 100)``; ``lease``,
    ``heartbeat`` and ``poll`` default to their ``LEASEJOBS_*`` settings. ``maintenance`` is a list
    of callables the scheduler step runs (see :meth:`_run_scheduler`). ``max_stuck=N`` stops the
    worker gracefully once N handlers are stuck (``stuck_limit_reached`` then says so).
    ``console`` gets one line per finished attempt (``runjobworker`` passes its own).
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
    ) -> None:
        _positive("concurrency", concurrency, integer=True)
        if isinstance(queues, Mapping):
            if concurrency is not None:
                raise ValueError(
                    "Give each queue its threads (queues={name: threads}) or one concurrency "
                    "for all of them, not both."
                )
            self.budgets = _checked_budgets(queues)
            self.queues = list(self.budgets)
            concurrency = sum(self.budgets.values())
        else:
            self.budgets = None
            self.queues = _checked_queues(queues)
            concurrency = DEFAULT_CONCURRENCY if concurrency is None else concurrency
        _positive("async_concurrency", async_concurrency, integer=True)
        _positive("batch", batch, integer=True)
        _positive("lease", lease)
        _positive("heartbeat", heartbeat)
        _positive("poll", poll)
        _positive("max_jobs", max_jobs, integer=True)
        _positive("max_stuck", max_stuck, integer=True)
        _check_grace(grace)
        self.concurrency = concurrency
        self.async_concurrency = async_concurrency
        self._async_enabled = async_execution.possible()
        capacity = concurrency + (async_concurrency if self._async_enabled else 0)
        self.batch = batch or max(capacity, DEFAULT_BATCH)
        self.lease = float(lease if lease is not None else settings.LEASE_SECONDS)
        self.heartbeat = float(heartbeat if heartbeat is not None else settings.HEARTBEAT_SECONDS)
        self.poll = float(poll if poll is not None else settings.POLL_SECONDS)
        if self.heartbeat >= self.lease:
            raise ValueError(
                f"heartbeat ({self.heartbeat:g} s) must be shorter than the lease "
                f"({self.lease:g} s), or leases expire between renewals."
            )
        self.max_jobs = max_jobs
        self.max_stuck = max_stuck
        settings.RETENTION  # noqa: B018  a bad LEASEJOBS_RETENTION stops the start, clearly
        if worker_id is not None and (not worker_id.strip() or len(worker_id) > 200):
            raise ValueError("worker_id must be a non-empty string of at most 200 characters.")
        self.worker_id = worker_id or default_worker_id()
        self.scheduler = scheduler
        self.grace = float(grace)
        self.maintenance = list(maintenance)
        self.console = console
        self._init_state()

    def run(self, burst: bool = False) -> Summary:
        """Run until stopped (or, with ``burst``, until nothing is due and nothing runs)."""
        with self.connection_keeper.adopted():  # the claim loop runs on the caller's thread
            return self._run(burst)

    def _run(self, burst: bool) -> Summary:
        started = time.monotonic()
        logger.info(
            "worker.started id=%s queues=%s concurrency=%s async_concurrency=%s batch=%s "
            "lease=%g heartbeat=%g poll=%g burst=%s max_jobs=%s scheduler=%s grace=%g "
            "max_stuck=%s",
            self.worker_id,
            _queues_text(self.queues, self.budgets),
            self.concurrency,
            self.async_concurrency if self._async_enabled else 0,
            self.batch,
            self.lease,
            self.heartbeat,
            self.poll,
            burst,
            self.max_jobs,
            self.scheduler,
            self.grace,
            self.max_stuck,
        )
        if self.scheduler:
            self._sync_schedules()
        self._start_pool()
        self._start_async()
        self._start_heartbeat()
        self._start_watchdog()
        if not burst:
            self._start_listener()
        try:
            self._loop(burst)
        finally:
            self._shutdown()
            self._flush_runtimes()  # what the last beat did not write
            self._release_retention()
            self.summary.seconds = time.monotonic() - started
            self._log_stopped()
        return self.summary

    def _log_stopped(self) -> None:
        s = self.summary
        logger.info(
            "worker.stopped id=%s reason=%s claimed=%s succeeded=%s retried=%s dead=%s "
            "stale=%s released=%s snoozed=%s cancelled=%s timed_out=%s stuck=%s seconds=%.2f",
            self.worker_id,
            self._stop_reason or "done",
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


def _queues_text(queues: list[str] | None, budgets: dict[str, int] | None) -> str:
    """``mail:10,reports:2``, ``a,b`` or ``*``, for the log."""
    if budgets is not None:
        return ",".join(f"{name}:{threads}" for name, threads in budgets.items())
    return ",".join(queues) if queues is not None else "*"


BUDGET = re.compile(r"(?P<name>.*):(?P<threads>\d+)")
"""A queue with its threads: a trailing ``:<digits>`` is always a budget, never part of a name."""


def parse_queues(text: str) -> list[str] | dict[str, int] | None:
    """``"a,b"`` -> ``["a", "b"]``; ``"mail:10,reports:2"`` -> ``{"mail": 10, "reports": 2}``
    (threads per queue); ``"*"`` -> ``None`` (every queue). Raises on an empty list, on a
    budget given to some queues only, on a budget of 0 and on a queue named twice."""
    if text.strip() == "*":
        return None
    names = [name.strip() for name in text.split(",")]
    if not any(names) or not all(names):
        raise ValueError(
            f"--queues needs comma-separated queue names (or '*' for all), not {text!r}."
        )
    budgeted = [BUDGET.fullmatch(name) for name in names]
    if not any(budgeted):
        return names
    if not all(budgeted):
        plain = ", ".join(name for name, match in zip(names, budgeted, strict=True) if not match)
        raise ValueError(
            f"--queues {text}: give every queue its threads (name:threads) or none of them; "
            f"{plain} has none."
        )
    budgets: dict[str, int] = {}
    for match in budgeted:
        assert match is not None
        name, threads = match["name"].strip(), int(match["threads"])
        if not name:
            raise ValueError(f"--queues {text}: a budget needs a queue name before the ':'.")
        if threads < 1:
            raise ValueError(f"--queues {text}: queue {name} needs at least 1 thread, not 0.")
        if name in budgets:
            raise ValueError(f"--queues {text}: queue {name} is given twice.")
        budgets[name] = threads
    return budgets


__all__ = ["Summary", "Worker", "default_worker_id", "parse_queues"]
