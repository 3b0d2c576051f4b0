"""``django_leasejobs.schedules``: cron schedules from code, the public name.

A schedule's occurrences (``next_occurrences``, ``occurrences_between``), what became of each
(``occurrence_history``, ``history_of``: its job, its skip or a gap), the scheduler's step
(``tick``) and the sync of declared schedules (``sync_from_settings``, ``declared_in_code``,
``validate_schedule_spec``). They live in the worker's layer (``runtime/schedules.py``,
``runtime/schedule_settings.py``), which is internal and moves as the code asks;
docs/recurrence.md and projects import them from here.
"""

from .runtime.schedule_settings import (
    SyncResult,
    declared_in_code,
    sync_from_settings,
    validate_schedule_spec,
)
from .runtime.schedules import (
    Occurrence,
    history_of,
    next_occurrences,
    occurrence_history,
    occurrences_between,
    tick,
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
