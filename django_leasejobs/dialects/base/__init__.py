"""The ORM's dialect, which every other subclasses: the interface and its ORM versions
(``dialect``, which inherits the claim and the renewal from ``leasing``), and the steps they
share (``limited``, ``within_limits``, ``workflow_steps``, ``limiter_pruning``,
``expressions``, ``pauses``)."""

from .dialect import (
    OPERATIONS,
    Completed,
    Completion,
    Dialect,
    LogRow,
    Renewed,
    Token,
    after,
    succeeded_fields,
)

__all__ = [
    "OPERATIONS",
    "Completed",
    "Completion",
    "Dialect",
    "LogRow",
    "Renewed",
    "Token",
    "after",
    "succeeded_fields",
]
