"""django-leasejobs: durable, lease-based jobs in your Django database.

The public face is what users import, and all the docs import: ``job`` registers a function;
``Backoff`` tunes its retries; ``PermanentError`` dead-letters a job at once; ``Retry`` and
``Snooze`` let a handler choose when it runs again; ``JobFailedError`` is what waiting for a job
that ended dead or cancelled raises; ``Workflow``, ``chain`` and ``group`` run jobs after one
another (``workflows``); ``JobContext`` is a handler's running attempt; ``Worker`` runs jobs
in-process. The modules at the top of the package are public too (``models``, ``operations``,
``schedules``, ``stats``, ``signals``, ``conf``, ``testing``, ...); the layer folders
(``core``, ``db``, ``dialects``, ``protocol``, ``upkeep``, ``reports``, ``runtime``) are
internal: docs/architecture.md.

``Worker`` and ``JobContext`` are loaded on first use: they import the models, which a package
imported while Django loads its apps must not do.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.backoff import Backoff
from .errors import JobFailedError, JobValidationError, PermanentError, UnknownJobError
from .jobs import job
from .retries import Retry, Snooze
from .workflows import Workflow, chain, group

if TYPE_CHECKING:
    from .runtime.context import JobContext
    from .runtime.worker import Worker

_LAZY = {
    "JobContext": ".runtime.context",
    "Worker": ".runtime.worker",
}
"""Public names whose modules need the app registry: imported when first asked for."""

__all__ = [
    "Backoff",
    "JobContext",
    "JobFailedError",
    "JobValidationError",
    "PermanentError",
    "Retry",
    "Snooze",
    "UnknownJobError",
    "Worker",
    "Workflow",
    "chain",
    "group",
    "job",
]
__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
