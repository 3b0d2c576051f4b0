"""Finding the jobs a worker can run only once it imports their module, for the wake-up.

A worker wakes the jobs other workers deferred (``protocol.wake_deferred``) for the names it
has registered. A job defined outside ``jobs.py`` (in a module an app imports only when used)
is registered only once something imports its module: a worker would otherwise run it only
when its deferral delay ran out (up to minutes), not when the worker starts. So at its start,
and then every ``FIRST_DELAY`` seconds (a job deferred later waits that long anyway), the
worker reads the names of the deferred jobs and imports, as a claim would (only where
``job_modules`` allows), the modules of those it has not registered. Each name is tried once
per process: a worker's code does not change while it runs.
"""

from __future__ import annotations

from .. import protocol
from ..core import registry
from ..errors import UnknownJobError
from ..protocol.deferrals import FIRST_DELAY

MOST_TRIED = 10_000
"""Names remembered as tried; past this the memory starts again (a bound, never reached in use)."""


class DeferredNames:
    """The worker's search for deferred jobs whose module it has not imported yet."""

    def __init__(self, every: float = FIRST_DELAY) -> None:
        self.every = every
        self._next = float("-inf")
        self._tried: set[str] = set()

    def import_waiting(self, now: float) -> list[str]:
        """At most every ``every`` seconds (``now`` is monotonic): import the modules of the
        deferred names not registered here; the names that registered."""
        if now < self._next:
            return []
        self._next = now + self.every
        if len(self._tried) > MOST_TRIED:
            self._tried.clear()
        found = []
        known = registry.runnable()  # registered names and their aliases
        for name in protocol.deferred_names():
            if name in self._tried or name in known:
                continue
            self._tried.add(name)
            try:
                registry.find(name)  # imports its module, where a claim could
            except UnknownJobError:
                continue
            found.append(name)
        return found
