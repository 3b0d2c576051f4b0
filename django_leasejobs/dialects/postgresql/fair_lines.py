"""PostgreSQL's fair places: one row's in the INSERT itself, many rows' read in one statement.

An ``enqueue()``: its INSERT takes the row's place from ``leasejobs_fair_place`` (migration
0027), the reads and ``core.fairness.Place``'s rule in PL/pgSQL, whose statements are planned
once per session, in the INSERT's own round trip (``placed``). Django sends statements
unprepared, and planning the reads (the partial indexes' conditions, the partitions) cost
several times their execution: as a statement of its own the read added 0.5 ms to an enqueue,
in the INSERT 0.1 ms (docs/benchmarks.md#fairness). An ``enqueue_many``: one statement reads
every key's line (``MANY``), planned once for all of them, the key's last place and its count
in one backward range of ``leasejobs_fair_key``; its text is the same for two keys or a
thousand, and ``fair_stamps`` hands out the places.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections

from ..fair_lines import Group, Line
from ..sql import JOB, WAITING
from .timestamps import timestamps_in_c

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


def placed(given: tuple[str, ...], columns: list[str], values: list[str]) -> str:
    """Make an INSERT's ``columns`` and ``values`` (quoted names, placeholders) of one fair row
    take its place from ``leasejobs_fair_place``, and return the ``WITH`` that computes it. A
    row asked to run later keeps its ``run_at`` (the function gives NULL)."""
    at = "(SELECT at FROM place)"
    if "run_at" in given:
        asked = "%(run_at)s"
        values[columns.index('"run_at"')] = f"COALESCE({at}, %(run_at)s)"
    else:
        asked = "NULL"
        columns.append('"run_at"')
        values.append(at)
    columns.append('"fair_at"')
    values.append(at)
    weight = "%(fair_weight)s" if "fair_weight" in given else "1"
    return (
        "WITH place AS (SELECT leasejobs_fair_place("
        f"%(queue)s, %(priority)s, %(fair_key)s, {weight}, {asked}) AS at) "
    )


def read_lines(alias: str, groups: Sequence[Group]) -> list[Line]:
    """Each group's line, in the order given: one statement (``MANY``)."""
    params: dict[str, Any] = {
        "queues": [group.queue for group in groups],
        "priorities": [group.priority for group in groups],
        "keys": [group.key for group in groups],
    }
    with connections[alias].cursor() as cursor:
        timestamps_in_c(cursor.cursor)
        cursor.execute(MANY, params)
        return [Line.of(*row) for row in cursor.fetchall()]
