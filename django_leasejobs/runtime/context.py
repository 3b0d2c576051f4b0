"""What a handler declared with ``takes_context=True`` receives as its first argument."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import protocol
from .flags import Flag
from .progress import Progress

TIMEOUT = "timeout"
"""``cancel_reason`` when the handler ran past its ``timeout``."""
CANCELLED = "cancelled"
"""``cancel_reason`` when an operator cancelled the running job."""


class Cancellation:
    """Set once by the worker when it ends an attempt under a running handler, and why.

    A Python thread cannot be stopped from outside: the worker writes the attempt's end itself
    and sets this, and a cooperative handler sees it and returns. ``wait()`` lets a handler
    sleep in steps that end as soon as it is set.
    """

    __slots__ = ("_flag", "reason")

    def __init__(self) -> None:
        self._flag = Flag()
        self.reason: str | None = None

    def set(self, reason: str) -> bool:
        """Set it with ``reason``; False (and the first reason kept) if it was already set.

        One caller sets it, the winner of the slot's end (``Slot.try_end``): the reason is
        written before the flag that makes it visible."""
        if self._flag.is_set():
            return False
        self.reason = reason
        return self._flag.set()

    def is_set(self) -> bool:
        return self._flag.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._flag.wait(timeout)


@dataclass
class JobContext:
    """The running attempt: its identity, its fencing token, and whether the lease is still held.

    ``lease_lost`` turns true when a heartbeat finds the job reclaimed; ``cancelled`` when the
    worker ended the attempt (``cancel_reason``: ``"timeout"`` or ``"cancelled"``). A long
    handler should check them between steps and stop: nothing it reports afterwards is accepted.
    """

    job_id: int
    attempt: int
    name: str
    queue: str
    worker_id: str
    lease_lost_event: Flag = field(default_factory=Flag)
    cancellation: Cancellation = field(default_factory=Cancellation)
    completed: bool = False
    result: Any = None
    upgraded: protocol.Upgraded | None = None
    """The arguments the worker upgraded for this call: ``complete()`` stores them too."""
    workflow_step_id: int | None = None
    """The workflow step this job runs (docs/workflows.md); None for a job alone."""
    atomic_depth: int | None = None
    """The handler's connection's atomic depth when a sync handler was called: a progress
    update made in a transaction the handler opened waits (:mod:`.progress`)."""
    span: Any = field(default=None, repr=False)
    """The attempt's ``process`` span while it records (``runtime/telemetry.py``): progress
    updates become its events. None without an SDK that records it."""
    logs: Any = field(default=None, repr=False)
    """The attempt's log buffer while logs are kept (:mod:`.job_logs`), else None."""
    _progress: Progress | None = field(default=None, repr=False)
    _step: Any = field(default=None, repr=False)
    _parent_results: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def step(self) -> Any:
        """The ``WorkflowStep`` this job runs (read once), or None for a job alone; pass it in
        ``ctx.workflow.add(sig, after=[ctx.step])``."""
        if self._step is None and self.workflow_step_id is not None:
            from .workflow_context import step_of

            self._step = step_of(self.workflow_step_id)
        return self._step

    @property
    def workflow(self) -> Any:
        """The step's run, to add steps to it (``ctx.workflow.add(...)``); None for a job
        alone."""
        from .workflow_context import RunHandle

        step = self.step
        return None if step is None else RunHandle(step.run_id)

    @property
    def parent_results(self) -> dict[str, Any]:
        """The results of the step's parents by step name, in ``after`` order (None for a
        parent that did not succeed); {} for a job alone or a step without parents."""
        if self._parent_results is None:
            from .workflow_context import parent_results

            self._parent_results = parent_results(self.workflow_step_id)
        return self._parent_results

    @property
    def lease_lost(self) -> bool:
        return self.lease_lost_event.is_set()

    @property
    def cancelled(self) -> bool:
        """True once the worker ended this attempt (a timeout, an operator's cancel)."""
        return self.cancellation.is_set()

    @property
    def cancel_reason(self) -> str | None:
        """``"timeout"`` or ``"cancelled"`` once ``cancelled`` is true, else ``None``."""
        return self.cancellation.reason if self.cancellation.is_set() else None

    def wait_cancelled(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking at once when cancelled; return ``cancelled``."""
        return self.cancellation.wait(seconds)

    def progress(self, done: float, total: float | None = None, message: str = "") -> None:
        """Report how far the handler got: ``done`` out of ``total`` (None: unknown), and what
        it is doing. Returns at once; readers see ``job.progress``.

        ``done`` and ``total`` are numbers >= 0 with ``total >= done``; ``message`` a str, cut
        to 500 characters. A bad update raises ``JobValidationError`` at once. Updates are
        written at most about once a second, the last one always, with the attempt's end;
        an update of an attempt that lost its lease changes nothing.
        """
        if self._progress is None:
            self._progress = Progress(
                self.job_id, self.attempt, atomic_depth=self.atomic_depth, span=self.span
            )
        self._progress.update(done, total, message)

    def end_progress(self) -> None:
        """The attempt's span is ending: its last progress update becomes an event of it."""
        if self._progress is not None:
            self._progress.end_events()

    def flush_progress(self) -> None:
        """Write the pending progress update, if any (the runner, before the attempt's end)."""
        if self._progress is not None:
            self._progress.flush()

    def first_time(self, key: str) -> bool:
        """Record the effect ``key`` in the current transaction; False if already recorded.

        Use it inside ``transaction.atomic()`` with the writes it guards::

            with transaction.atomic():
                if ctx.first_time(f"invoice-sent:{invoice_id}"):
                    Invoice.objects.filter(pk=invoice_id).update(sent=True)

        Keys are global: include a business id so that a retry, and a replay, skip the effect.
        """
        return protocol.record_effect(key, self.job_id)

    def complete(self, result: Any = None) -> None:
        """Mark the job succeeded in the current transaction, with the handler's own writes.

        If the lease was lost, ``StaleAttemptError`` is raised and the transaction rolls back,
        so database-only work takes effect exactly once.
        """
        protocol.complete_in_transaction(self.job_id, self.attempt, result, self.upgraded)
        self.completed = True
        self.result = result
