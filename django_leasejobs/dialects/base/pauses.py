"""The pause test every claim applies: no row of a paused queue or a paused job name.

A condition of the claim's own statements (the plain claim and each step of a limited one), so
it is read in the same snapshot as the rows it keeps; see ``protocol.pauses``. PostgreSQL's
statements say it in SQL (``postgresql.sql.not_paused``).
"""

from __future__ import annotations

from django.db.models import Q

from ...models import Pause, PauseKind


def not_paused(alias: str) -> Q:
    """Rows of no paused queue and no paused job name."""
    pauses = Pause.objects.using(alias)
    return ~Q(queue__in=pauses.filter(kind=PauseKind.QUEUE).values("name")) & ~Q(
        name__in=pauses.filter(kind=PauseKind.JOB).values("name")
    )
