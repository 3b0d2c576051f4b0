"""PostgreSQL's reads of fair keys' lines: one key by a function, many in one statement.

One key (an ``enqueue()``): ``leasejobs_fair_line(queue, priority, key)``, migration 0027's
PL/pgSQL function of the three reads of ``dialects.fair_lines``, whose statements are planned
once per session. Django sends statements unprepared, and planning the reads (the partial
indexes' conditions, the partitions) cost several times their execution: an enqueue's read
took 0.5 ms more as a plain statement. Many keys (an ``enqueue_many``): one statement over the
keys as three arrays, planned once for all of them, the key's last place and its count read
in one backward range of ``leasejobs_fair_key``; its text is the same for two keys or a
thousand. In the function, a call per key cost 1.7 times as much (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections

from ...db.dbtime import as_aware
from ..fair_lines import Group, Line
from ..sql import JOB, WAITING
from .insert import timestamps_in_c

ONE = "SELECT head, last, at_last, now FROM leasejobs_fair_line(%(queue)s, %(priority)s, %(key)s)"

MANY = f"""
SELECT
    (SELECT run_at FROM {JOB}
     WHERE queue = g.queue AND priority = g.priority AND {WAITING} AND fair_key IS NOT NULL
     ORDER BY run_at LIMIT 1),
    last.fair_at, COALESCE(last.n, 0), STATEMENT_TIMESTAMP()
FROM unnest(%(queues)s::text[], %(priorities)s::integer[], %(keys)s::text[])
    WITH ORDINALITY AS g(queue, priority, fair_key, i)
LEFT JOIN LATERAL (
    SELECT fair_at, COUNT(*) AS n FROM {JOB}
    WHERE queue = g.queue AND priority = g.priority AND fair_key = g.fair_key
      AND {WAITING} AND fair_at IS NOT NULL
    GROUP BY fair_at ORDER BY fair_at DESC LIMIT 1
) AS last ON TRUE
ORDER BY g.i
"""


def read_lines(alias: str, groups: Sequence[Group]) -> list[Line]:
    """Each group's line, in the order given: one statement."""
    if len(groups) == 1:
        (group,) = groups
        statement = ONE
        params: dict[str, Any] = {
            "queue": group.queue,
            "priority": group.priority,
            "key": group.key,
        }
    else:
        statement = MANY
        params = {
            "queues": [group.queue for group in groups],
            "priorities": [group.priority for group in groups],
            "keys": [group.key for group in groups],
        }
    with connections[alias].cursor() as cursor:
        timestamps_in_c(cursor.cursor)
        cursor.execute(statement, params)
        return [
            Line(
                None if head is None else as_aware(head),
                None if last is None else as_aware(last),
                int(at_last),
                as_aware(now),
            )
            for head, last, at_last, now in cursor.fetchall()
        ]
