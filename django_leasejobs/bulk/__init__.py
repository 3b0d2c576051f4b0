"""Bulk actions: cancel, retry or delete every job a filter matches (docs/operations.md).

The admin, the HTTP API (``POST jobs/bulk/``) and ``manage.py bulkjobs`` are thin over this:
``filters`` reads a filter, ``actions`` counts (the dry run) and acts in keyed batches, each
bulk action writing one admin log entry. State changes are the layers' below (``protocol``'s
cancel and replay, ``upkeep``'s deletion of finished jobs).
"""

from __future__ import annotations

from .actions import (
    ACTIONS,
    BATCH,
    Action,
    Preview,
    Result,
    action_named,
    check_statuses,
    preview,
    run,
    targets,
)
from .filters import KEYS, FilterError, describe, jobs, parse

__all__ = [
    "ACTIONS",
    "BATCH",
    "KEYS",
    "Action",
    "FilterError",
    "Preview",
    "Result",
    "action_named",
    "check_statuses",
    "describe",
    "jobs",
    "parse",
    "preview",
    "run",
    "targets",
]
