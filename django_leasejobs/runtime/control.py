"""Stopping a worker: the events every thread watches, ``stop()``, and the signal handlers.

``stop()`` may come from any thread (a signal on the main thread, the watchdog at
``max_stuck``, ``runjobworker --reload``, a test): it records why, sets ``stopping`` and wakes
the claim loop, which then runs :mod:`.shutdown`. A second signal exits at once and releases
nothing: the leases expire and lease recovery takes the jobs again, as after a crash.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from .slots import InFlight

logger = logging.getLogger("django_leasejobs")

FORCED_EXIT_CODE = 1
"""Exit status after a second signal: nothing released, leases left to expire."""


class Control:
    """The worker's stop and wake-up events, and why it stopped."""

    def __init__(self, worker_id: str, grace: float, slots: InFlight) -> None:
        self.worker_id = worker_id
        self.slots = slots
        self.grace = grace
        """Seconds in-flight jobs get at a stop: written by :meth:`stop` before it sets
        ``stopping``, read by shutdown (main thread) after."""
        self.wake = threading.Event()
        """Ends the claim loop's wait: set by the runners (room for a claim), the LISTEN thread
        and :meth:`stop`; cleared and waited on by the main thread only."""
        self.stopping = threading.Event()
        """Set by :meth:`stop` and shutdown; every thread's loop ends on it."""
        self.abandon = threading.Event()
        """Set by shutdown when it gives up on in-flight work: result writes retrying stop."""
        self.reason = ""
        """Why the worker stopped: written by the first :meth:`stop` or by the claim loop when
        it ends on its own; read by the main thread once the run ended."""
        self.stop_at: float | None = None
        """``time.monotonic()`` of the first stop: the grace counts from it (written with
        ``reason``)."""
        self._signals = 0
        """Signals received; signal handlers run on the main thread only."""

    def stop(self, reason: str = "stop requested", *, grace: float | None = None) -> None:
        """Stop claiming; in-flight jobs get ``grace`` seconds, then the rest is released."""
        if grace is not None:
            self.grace = float(grace)
        if not self.stopping.is_set():
            self.reason = reason
            self.stop_at = time.monotonic()
            logger.info(
                "worker.stopping id=%s reason=%s in_flight=%s grace=%g",
                self.worker_id,
                reason,
                self.slots.running,
                self.grace,
            )
        self.stopping.set()
        self.wake.set()

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

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals > 1:
            logger.warning(
                "worker.forced_exit id=%s signal=%s in_flight=%s (leases will expire)",
                self.worker_id,
                name,
                self.slots.total,
            )
            sys.stderr.flush()
            os._exit(FORCED_EXIT_CODE)
        self.stop(f"signal {name}")
