"""The worker's options: checked once, at construction, then read by every part and never written.

``Worker(...)`` takes them as keyword arguments; :meth:`WorkerOptions.build` refuses a bad value
with a ``ValueError`` that names it, fills in the ``LEASEJOBS_*`` settings and derives what
follows from them (the total of the threads, the default batch), so no part of the worker
checks an option again.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.conf import settings
from ..models import databases
from . import async_execution

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


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """Every option of one worker, valid (see :meth:`build`)."""

    worker_id: str
    queues: list[str] | None
    """The queues claimed from; ``None``: every queue."""
    budgets: dict[str, int] | None
    """Threads per queue (``--queues mail:10,reports:2``), or ``None``: one shared pool."""
    concurrency: int
    """Threads running sync handlers (with budgets, their total)."""
    async_concurrency: int
    """Most ``async def`` handlers at once, when this process can meet any."""
    async_enabled: bool
    """Whether this process can meet async handlers (see ``async_execution.possible``)."""
    batch: int
    lease: float
    heartbeat: float
    poll: float
    max_jobs: int | None
    max_stuck: int | None
    scheduler: bool
    grace: float
    """The grace of a stop that gives none (``Worker.stop(grace=...)`` overrides it)."""
    database: str
    """The queue database claimed from (``--database``); a worker never claims across two."""

    @classmethod
    def build(
        cls,
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
        max_stuck: int | None = None,
        database: str | None = None,
    ) -> WorkerOptions:
        """Check ``Worker``'s arguments and fill in the defaults; ``ValueError`` names a bad one."""
        _positive("concurrency", concurrency, integer=True)
        budgets: dict[str, int] | None
        if isinstance(queues, Mapping):
            if concurrency is not None:
                raise ValueError(
                    "Give each queue its threads (queues={name: threads}) or one concurrency "
                    "for all of them, not both."
                )
            budgets = _checked_budgets(queues)
            names: list[str] | None = list(budgets)
            concurrency = sum(budgets.values())
        else:
            budgets = None
            names = _checked_queues(queues)
            concurrency = DEFAULT_CONCURRENCY if concurrency is None else concurrency
        _positive("async_concurrency", async_concurrency, integer=True)
        _positive("batch", batch, integer=True)
        _positive("lease", lease)
        _positive("heartbeat", heartbeat)
        _positive("poll", poll)
        _positive("max_jobs", max_jobs, integer=True)
        _positive("max_stuck", max_stuck, integer=True)
        _check_grace(grace)
        database = _checked_database(database, names)
        async_enabled = async_execution.possible()
        async_slots = async_concurrency if async_enabled else 0
        lease_s = float(lease if lease is not None else settings.LEASE_SECONDS)
        heartbeat_s = float(heartbeat if heartbeat is not None else settings.HEARTBEAT_SECONDS)
        if heartbeat_s >= lease_s:
            raise ValueError(
                f"heartbeat ({heartbeat_s:g} s) must be shorter than the lease "
                f"({lease_s:g} s), or leases expire between renewals."
            )
        settings.RETENTION  # noqa: B018  a bad LEASEJOBS_RETENTION stops the start, clearly
        if worker_id is not None and (not worker_id.strip() or len(worker_id) > 200):
            raise ValueError("worker_id must be a non-empty string of at most 200 characters.")
        return cls(
            worker_id=worker_id or default_worker_id(),
            queues=names,
            budgets=budgets,
            concurrency=concurrency,
            async_concurrency=async_concurrency,
            async_enabled=async_enabled,
            batch=batch or max(concurrency + async_slots, DEFAULT_BATCH),
            lease=lease_s,
            heartbeat=heartbeat_s,
            poll=float(poll if poll is not None else settings.POLL_SECONDS),
            max_jobs=max_jobs,
            max_stuck=max_stuck,
            scheduler=scheduler,
            grace=float(grace),
            database=database,
        )

    @property
    def async_slots(self) -> int:
        """Async handlers this worker may run at once: 0 when it starts no event loop."""
        return self.async_concurrency if self.async_enabled else 0

    @property
    def queues_text(self) -> str:
        """``mail:10,reports:2``, ``a,b`` or ``*``, for the log."""
        if self.budgets is not None:
            return ",".join(f"{name}:{threads}" for name, threads in self.budgets.items())
        return ",".join(self.queues) if self.queues is not None else "*"


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
        missing = ", ".join(name for name, match in zip(names, budgeted, strict=True) if not match)
        raise ValueError(
            f"--queues {text}: give every queue its threads (name:threads) or none of them; "
            f"{missing} has none."
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


def _checked_database(database: str | None, queues: list[str] | None) -> str:
    """The queue database served: ``database`` if it is one, else the home one; a queue named
    in ``queues`` must be written there, or this worker would wait for it for ever."""
    known = databases.queue_databases()
    if database is None:
        database = known[0]
    elif database not in known:
        raise ValueError(
            f"database {database!r} is not a queue database (the queue databases are "
            f"{', '.join(map(repr, known))}: LEASEJOBS_DATABASE and the values of "
            "LEASEJOBS_QUEUE_DATABASES)."
        )
    elsewhere = {
        queue: alias
        for queue in queues or ()
        if (alias := databases.queue_database(queue)) != database
    }
    if elsewhere:
        named = ", ".join(f"{queue} in {alias!r}" for queue, alias in elsewhere.items())
        raise ValueError(
            f"queues {named}, not in {database!r} that this worker serves "
            "(LEASEJOBS_QUEUE_DATABASES): run a worker with --database for each."
        )
    return database
