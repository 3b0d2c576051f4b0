"""A one-way switch, like ``threading.Event``, that builds no event until someone waits on it.

Every claimed job carries two (its lease lost, its cancellation), set at most once by another
thread and read by the handler. ``threading.Event`` builds a ``Condition`` and its lock in
Python for each, on the claim loop's thread, for every job; almost no handler ever waits on
them. Here setting and reading are an attribute, and the event is made by the first ``wait``.
"""

from __future__ import annotations

import threading


class Flag:
    """Set once; ``is_set`` reads it, ``wait`` sleeps until it is set (or ``timeout``)."""

    __slots__ = ("_event", "_set")

    _guard = threading.Lock()
    """Orders ``set`` against a ``wait`` making the event: held for a few instructions."""

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> bool:
        """Set it; False if it was already set (the first caller wins)."""
        with Flag._guard:
            if self._set:
                return False
            self._set = True
            event = self._event
        if event is not None:
            event.set()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """As ``threading.Event.wait``: True once set, False if ``timeout`` passed first."""
        with Flag._guard:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)
