"""Writes to the tables beside the jobs: pruning (finished workflow runs too), retention, the
history partitions (PostgreSQL), the maintenance lease, the live workers' rows, the lease
advisor's counters and each attempt's logs."""

from .history import (
    PARTITIONS,
    Partitions,
    drop_expired,
    move_finished,
    prepare_move,
    walk_bound,
)
from .job_logs import AttemptLogs, store_logs
from .maintenance import RETENTION, give_up_lease, take_lease
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
from .workflow_pruning import RUN_STATES, count_prunable_runs, prune_runs

__all__ = [
    "PARTITIONS",
    "PRUNABLE",
    "PRUNE_AFTER_LEASES",
    "RETENTION",
    "RUN_STATES",
    "AttemptLogs",
    "Beat",
    "Partitions",
    "RuntimeCounts",
    "beat",
    "count_lost_workers",
    "count_prunable",
    "count_prunable_limiters",
    "count_prunable_runs",
    "count_prunable_samples",
    "deletable",
    "delete_finished",
    "drop_expired",
    "forget_worker",
    "give_up_lease",
    "move_finished",
    "prepare_move",
    "prune_finished",
    "prune_limiters",
    "prune_runs",
    "prune_runtime_stats",
    "prune_samples",
    "prune_workers",
    "record_runtimes",
    "store_logs",
    "take_lease",
    "walk_bound",
]
