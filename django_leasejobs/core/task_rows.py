"""The seam through which the worker and the protocol reach ``django.tasks`` rows.

A row that the tasks backend enqueued (``Job.task_backend`` set, no ``@job`` of that name)
runs a ``django.tasks`` ``Task``, and a replay of one resolves its task path again. Both
belong to the tasks face (``django_leasejobs.tasks``), which sits above the worker and the
protocol: so the face registers a handler here when the app loads (``apps.ready``), and the
worker and the protocol call the handler, never the face. Until a handler is registered
(before ``django.setup()``) no row is treated as a task's: nothing is async, no backend is
configured, and running or resolving one says the app is not loaded.
"""

from __future__ import annotations

from typing import Any, Protocol


class TaskRows(Protocol):
    """What the worker and the protocol ask of the tasks face. ``execution`` is the
    worker's ``runtime.execution.Execution``, ``outcome`` a ``protocol.Outcome``."""

    def execute(self, execution: Any) -> None: ...

    async def aexecute(self, execution: Any) -> None: ...

    def is_async(self, job: Any) -> bool: ...

    def backend_configured(self) -> bool: ...

    def backoff(self, execution: Any) -> Any: ...

    def finished(self, execution: Any, outcome: Any) -> None: ...

    def recovered(self, outcomes: dict[int, Any]) -> None: ...

    def resolve(self, path: str) -> Any: ...


class _NotLoaded:
    """The handler before the tasks face registered its own."""

    def execute(self, execution: Any) -> None:
        raise RuntimeError(_NOT_LOADED)

    async def aexecute(self, execution: Any) -> None:
        raise RuntimeError(_NOT_LOADED)

    def is_async(self, job: Any) -> bool:
        return False

    def backend_configured(self) -> bool:
        return False

    def backoff(self, execution: Any) -> Any:
        return None

    def finished(self, execution: Any, outcome: Any) -> None:
        return None

    def recovered(self, outcomes: dict[int, Any]) -> None:
        return None

    def resolve(self, path: str) -> Any:
        raise RuntimeError(_NOT_LOADED)


_NOT_LOADED = (
    "A django.tasks row needs the tasks handler, which django_leasejobs registers when the "
    "app loads: is django_leasejobs in INSTALLED_APPS, and has django.setup() run?"
)
_handler: TaskRows = _NotLoaded()


def register(handler: TaskRows) -> None:
    """Install the tasks face's handler (``apps.ready`` does; registering again replaces it)."""
    global _handler
    _handler = handler


def handler() -> TaskRows:
    """The registered handler (or the one that knows no task, before the app loaded)."""
    return _handler
