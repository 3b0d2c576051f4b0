"""Writes to the tables beside the jobs: pruning, retention, the maintenance lease,
the live workers' rows and the lease advisor's counters."""

from .maintenance import RETENTION, release_lease, take_lease
from .pruning import (
    PRUNABLE,
    count_prunable,
    count_prunable_limiters,
    count_prunable_samples,
    deletable,
    delete_finished,
    prune_finished,
    prune_limiters,
    prune_samples,
)
from .runtime_stats import RuntimeCounts, prune_runtime_stats, record_runtimes
from .workers import (
    PRUNE_AFTER_LEASES,
    Beat,
    beat,
    count_lost_workers,
    forget_worker,
    prune_workers,
)

__all__ = [
    "PRUNABLE",
    "PRUNE_AFTER_LEASES",
    "RETENTION",
    "Beat",
    "RuntimeCounts",
    "beat",
    "count_lost_workers",
    "count_prunable",
    "count_prunable_limiters",
    "count_prunable_samples",
    "deletable",
    "delete_finished",
    "forget_worker",
    "prune_finished",
    "prune_limiters",
    "prune_runtime_stats",
    "prune_samples",
    "prune_workers",
    "record_runtimes",
    "release_lease",
    "take_lease",
]
