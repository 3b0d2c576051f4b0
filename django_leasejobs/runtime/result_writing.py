"""What a runner does once a handler returned: decide whether and how its result is written.

Shared by the pool threads (one slot at a time) and the async writer threads (many slots per
turn). A result is refused when the watchdog ended its attempt meanwhile and dropped when
shutdown released the job; a plain success joins the grouped completions; anything else is
written at once, through ``attempt_ends.write_result``, retried with capped backoff on database
errors: the write is guarded by the attempt token, so a late or repeated write can never
overwrite a newer result.
"""

from __future__ import annotations

import logging
import threading

from django.db import Error as DatabaseError

from ..protocol import Outcome
from . import attempt_ends, execution, job_logs
from .completions import Completer
from .ledger import Ledger
from .outage import RECONNECT, headline
from .slots import InFlight, Slot
from .watchdog import Watchdog

logger = logging.getLogger("django_leasejobs")

Finished = tuple[Slot, execution.Execution | None]
"""An async slot and its result (``None``: nothing to write, the job was released)."""


class ResultWriter:
    """Writes (or groups, or refuses) results; called on the runners' threads. It keeps no
    state of its own: the slots' states and the objects it is given hold it."""

    def __init__(
        self,
        *,
        worker_id: str,
        slots: InFlight,
        completer: Completer,
        ledger: Ledger,
        watchdog: Watchdog,
        abandon: threading.Event,
    ) -> None:
        self.worker_id = worker_id
        self.slots = slots
        self.completer = completer
        self.ledger = ledger
        self.watchdog = watchdog
        self.abandon = abandon
        """Set by shutdown when it gives up: a write retrying a database error stops."""

    def finished(self, slot: Slot, result: execution.Execution) -> bool:
        """A pool thread's handler returned: write its result. True if its completion waits for the
        next flush (the slot stays in flight until then). The pool's ``_returned`` then
        settles the slot (:meth:`.Watchdog.ended_returned`)."""
        with self.slots.gate:
            writing = slot.try_write()
        if writing is None:  # released (never written) or ended meanwhile
            if slot.ended:
                self.late(slot, result)  # the worker ended this attempt: token spent
            return False
        if self.completer.groupable(result):
            attempt_ends.flush_progress(result)  # before the grouped completion is written
            slot.execution = result
            slot.try_group()
            self.completer.add([slot])
            return True
        self.ledger.count(slot, self.write(result), result.unknown)
        return False

    def finished_many(self, batch: list[Finished]) -> None:
        """What :meth:`finished` and the pool's ``_returned`` do, for many async slots under
        one ``gate``; every slot settles here or, for a grouped success, at the next flush."""
        with self.slots.gate:
            won = [result is not None and slot.try_write() is not None for slot, result in batch]
        deferred: list[Slot] = []
        try:
            for (slot, result), writing in zip(batch, won, strict=True):
                if writing and result is not None:
                    if self.completer.groupable(result):
                        attempt_ends.flush_progress(result)
                        slot.execution = result
                        slot.try_group()
                        deferred.append(slot)  # the claim loop's next flush settles it
                        continue
                    self.ledger.count(slot, self.write(result), result.unknown)
                if self.watchdog.ended_returned(slot):
                    self.late(slot, result)  # the watchdog ended it, cancelled its task
        finally:
            if deferred:
                self.completer.add(deferred)

    def late(self, slot: Slot, result: execution.Execution | None) -> None:
        """The handler of an attempt the worker ended (a timeout, a cancel) returned: its
        result is refused, and what it logged until then is kept (:mod:`.job_logs`)."""
        self.watchdog.refuse_late(slot)
        if result is not None:
            job_logs.keep([(result, Outcome.STALE)])

    def write(self, result: execution.Execution) -> Outcome:
        """Write the result; on a database error retry with backoff (the write is fenced)."""
        errors = 0
        while True:
            try:
                return attempt_ends.write_result(result)
            except DatabaseError as exc:
                errors += 1
                delay = RECONNECT.ceiling(errors)
                logger.warning(
                    "worker.database_error id=%s where=report job=%s retry_in=%.2f error=%s",
                    self.worker_id,
                    result.job.pk,
                    delay,
                    headline(exc),
                )
                execution.close_old_connections()
                if self.abandon.wait(delay):
                    # Shutdown gave up: the lease expires and the job runs again elsewhere.
                    return Outcome.STALE
