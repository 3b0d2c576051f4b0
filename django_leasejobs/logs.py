"""Each job's own logs, for a project's logging configuration (docs/observability.md).

``JobFields`` is the filter a project adds to its handlers in ``LOGGING`` (imported while
Django configures logging, before the apps load: nothing here imports a model);
``current_job()`` is the running attempt for structlog processors and the like.
"""

from __future__ import annotations

from typing import Any

from .core.job_log_context import CURRENT, JobFields

__all__ = ["JobFields", "current_job"]


def current_job() -> dict[str, Any] | None:
    """``{"job_id", "job_name", "attempt"}`` of the attempt running in this thread or task, or
    None outside a job."""
    attempt = CURRENT.get()
    return attempt._asdict() if attempt is not None else None
