"""``threading.Event``'s interface, with its condition variable made only when someone waits.

Every claimed job carries a "lease lost" event that the heartbeat sets in the rare case the job
was reclaimed. A ``threading.Event`` builds a ``Condition`` (a lock and a waiter list) up front;
made once per job, that was a tenth of a no-op worker's time. Handlers mostly ask ``is_set()``;
the condition appears the first time one waits.
"""

from __future__ import annotations

import threading

_CREATING = threading.Lock()


class LazyEvent:
    __slots__ = ("_event", "_flag")

    def __init__(self) -> None:
        self._flag = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        event = self._event
        if event is not None:
            event.set()

    def clear(self) -> None:
        self._flag = False
        event = self._event
        if event is not None:
            event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        with _CREATING:
            if self._event is None:
                self._event = threading.Event()
        # set() stores the flag before it reads _event: if it ran before _event existed, the
        # flag is visible here and is carried over to the new event.
        if self._flag:
            self._event.set()
        return self._event.wait(timeout)


EventLike = threading.Event | LazyEvent
