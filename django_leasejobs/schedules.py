"""``django_leasejobs.schedules``: cron schedules from code, the public name.

A schedule's occurrences (``next_occurrences``, ``occurrences_between``), what became of each
(``occurrence_history``, ``history_of``: its job, its skip or a gap), the scheduler's step
(``tick``) and the sync of declared schedules (``sync_from_settings``, ``declared_in_code``,
``validate_schedule_spec``). They live in the layers (the cron math in ``core/occurrences.py``,
the reads in ``reports/occurrences.py``, the tick in ``runtime/schedules.py``, the sync in
``upkeep/schedule_sync.py``), which are internal and move as the code asks; docs/recurrence.md
and projects import them from here.
"""

from .core.occurrences import occurrences_between
from .reports.occurrences import (
    Occurrence,
    history_of,
    next_occurrences,
    occurrence_history,
)
from .runtime.schedules import tick
from .upkeep.schedule_sync import (
    SyncResult,
    declared_in_code,
    sync_from_settings,
    validate_schedule_spec,
)

__all__ = [
    "Occurrence",
    "SyncResult",
    "declared_in_code",
    "history_of",
    "next_occurrences",
    "occurrence_history",
    "occurrences_between",
    "sync_from_settings",
    "tick",
    "validate_schedule_spec",
]
