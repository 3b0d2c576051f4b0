"""Jobs in a module that no installed app imports and that is outside every app's package.

Nothing imports it at start: a worker may import it for a row only when
``LEASEJOBS_TASK_MODULES`` lists it (``tests/core/test_registry.py``), and never otherwise.
"""

from __future__ import annotations

import threading

from django_leasejobs import job


@job
def late_report(day: str) -> str:
    return f"report for {day}"


class Reports:
    """A job whose name has a class in it (``module.Class.method``): found by its module."""

    @staticmethod
    @job
    def weekly() -> str:
        return "weekly"


@job(name="tests.renamed_report")
def renamed() -> str:
    """A name that is not this module's path: importing ``tests`` never registers it."""
    return "renamed"


@job
async def late_async() -> str:
    """Where it ran: the worker's event loop thread, when the worker found it to be async."""
    return threading.current_thread().name
