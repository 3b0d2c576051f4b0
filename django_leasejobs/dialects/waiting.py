"""Every waiting queue and its oldest due job, in one statement whatever the number of queues.

A recursive CTE walks the distinct queues of the waiting rows (``queue > previous``, each step
one probe of ``leasejobs_waiting``: a skip scan where ``SELECT DISTINCT`` would read every
waiting row), and for each queue two correlated ``MIN(run_at)`` probes give its oldest due
pending and failed job. One round trip instead of one query per queue: the anonymous health
verdict costs the same queries with one queue or a thousand. The same SQL runs on PostgreSQL,
SQLite and MariaDB/MySQL (recursive CTEs are standard there); values are parameters.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from django.db import connections

from ..db.dbtime import as_aware

_STATEMENT = """
WITH RECURSIVE waiting_queues (queue) AS (
    SELECT MIN(queue) FROM django_leasejobs_job WHERE status IN ('pending', 'failed')
    UNION ALL
    SELECT (
        SELECT MIN(later.queue) FROM django_leasejobs_job later
        WHERE later.status IN ('pending', 'failed') AND later.queue > waiting_queues.queue
    )
    FROM waiting_queues WHERE waiting_queues.queue IS NOT NULL
)
SELECT waiting_queues.queue,
    (SELECT MIN(due.run_at) FROM django_leasejobs_job due
     WHERE due.queue = waiting_queues.queue AND due.status = 'pending'
     AND due.run_at <= %s {names}),
    (SELECT MIN(due.run_at) FROM django_leasejobs_job due
     WHERE due.queue = waiting_queues.queue AND due.status = 'failed'
     AND due.run_at <= %s {names})
FROM waiting_queues WHERE waiting_queues.queue IS NOT NULL
ORDER BY waiting_queues.queue
"""


def oldest_due(
    alias: str, now: dt.datetime, paused_names: Collection[str] = ()
) -> dict[str, dt.datetime | None]:
    """Each queue holding a pending or failed job -> the ``run_at`` of its oldest job due at
    ``now`` that no job-name pause holds back (None: nothing due), in queue name order."""
    connection = connections[alias]
    names = sorted(paused_names)
    # Placeholders only: the paused names themselves go as parameters.
    excluded = f"AND due.name NOT IN ({', '.join(['%s'] * len(names))})" if names else ""
    at = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(_STATEMENT.format(names=excluded), [at, *names, at, *names])
        rows = cursor.fetchall()
    return {
        queue: min((as_aware(t) for t in (pending, failed) if t is not None), default=None)
        for queue, pending, failed in rows
    }
