"""The tasks face's handler for the job rows its backend marked, registered at app loading.

The worker and the protocol reach these functions through
:mod:`django_leasejobs.core.task_rows`, so they never import this face:
``LeaseJobsConfig.ready`` calls :func:`register`.
"""

from __future__ import annotations

from typing import Any

from ..core import task_rows
from . import execution, results


class Handler:
    """``core.task_rows.TaskRows`` over ``tasks.execution`` and ``tasks.results``."""

    execute = staticmethod(execution.execute)
    aexecute = staticmethod(execution.aexecute)
    is_async = staticmethod(execution.is_async)
    backend_configured = staticmethod(execution.backend_configured)
    backoff = staticmethod(execution.backoff)
    finished = staticmethod(execution.finished)

    @staticmethod
    def recovered(outcomes: dict[int, Any]) -> None:
        execution.recovered(outcomes)

    resolve = staticmethod(results.resolve)


def register() -> None:
    task_rows.register(Handler())
