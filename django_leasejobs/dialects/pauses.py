"""The pause test every claim applies: no row of a paused queue or a paused job name.

A condition of the claim's own statements (the plain claim and each step of a limited one), so
it is read in the same snapshot as the rows it keeps; see ``protocol.pauses``.
"""

from __future__ import annotations

from django.db.models import Q

from ..models import Pause, PauseKind


def not_paused(alias: str) -> Q:
    """Rows of no paused queue and no paused job name."""
    pauses = Pause.objects.using(alias)
    return ~Q(queue__in=pauses.filter(kind=PauseKind.QUEUE).values("name")) & ~Q(
        name__in=pauses.filter(kind=PauseKind.JOB).values("name")
    )


ROW_NOT_PAUSED = """NOT EXISTS (
    SELECT 1 FROM {pause} AS p
    WHERE (p.kind = 'queue' AND p.name = {row}.queue) OR (p.kind = 'job' AND p.name = {row}.name)
)"""
"""The same test in SQL, for the statements of a limited claim on PostgreSQL (``{row}`` is the
job row's alias)."""
