"""What a handler declared with ``takes_context=True`` receives as its first argument."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .. import protocol


@dataclass
class JobContext:
    """The running attempt: its identity, its fencing token, and whether the lease is still held.

    ``lease_lost`` turns true when a heartbeat finds the job reclaimed; a long handler should check
    it between steps and stop, since nothing it reports afterwards will be accepted.
    """

    job_id: int
    attempt: int
    name: str
    queue: str
    worker_id: str
    lease_lost_event: threading.Event = field(default_factory=threading.Event)
    completed: bool = False
    result: Any = None

    @property
    def lease_lost(self) -> bool:
        return self.lease_lost_event.is_set()

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
        protocol.complete_in_transaction(self.job_id, self.attempt, result)
        self.completed = True
        self.result = result
