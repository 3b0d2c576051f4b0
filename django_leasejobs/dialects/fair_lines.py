"""Where each fair key's next job goes in line: one statement for every key of an enqueue.

Per (queue, priority, key): the head of the queue's waiting fair jobs (the first entry of
``leasejobs_fair_head``), the key's last place in line (the last entry of its range of
``leasejobs_fair_key``) and how many of its jobs share that place (a range of the same index),
with the database's clock. The keys are a derived table of one row per key, each read by the
same three correlated subqueries, so that a bulk enqueue of many keys costs one round trip and
one small plan; only the number of rows varies in the text, never a value. The
same SQL runs on SQLite and MariaDB/MySQL (``Dialect.fair_lines``); each partial index's
condition is repeated term for term, so a database that has them can use them. PostgreSQL
calls a function of the same three reads instead (``postgresql/fair_lines.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import connections
from django.db.models.sql import Query

from ..db.dbtime import DbNow, as_aware
from .sql import JOB, WAITING

# Each read is an ORDER BY ... LIMIT 1 on its index, never MIN() or MAX(): PostgreSQL turns
# an aggregate into that only when its statistics say it pays, and on a table filled since
# the last ANALYZE it read the whole queue's fair jobs for the head (2.7 ms at 20,000).
_LAST = f"""SELECT fair_at FROM {JOB}
     WHERE queue = g.queue AND priority = g.priority AND fair_key = g.fair_key
       AND {WAITING} AND fair_at IS NOT NULL
     ORDER BY fair_at DESC LIMIT 1"""
_STATEMENT = f"""SELECT g.i,
    (SELECT run_at FROM {JOB}
     WHERE queue = g.queue AND priority = g.priority AND {WAITING} AND fair_key IS NOT NULL
     ORDER BY run_at LIMIT 1),
    ({_LAST}),
    (SELECT COUNT(*) FROM {JOB}
     WHERE queue = g.queue AND priority = g.priority AND fair_key = g.fair_key
       AND {WAITING} AND fair_at IS NOT NULL AND fair_at = ({_LAST})),
    {{now}}
FROM ({{groups}}) AS g"""
_GROUP = "SELECT %({n}_i)s AS i, %({n}_q)s AS queue, %({n}_p)s AS priority, %({n}_k)s AS fair_key"
"""One key's row of the derived table ``g`` (the first names its columns for every database:
MariaDB takes no column list after a ``VALUES`` table)."""

MAX_KEYS = 200
"""Keys per statement: a bulk enqueue of more keys sends several."""


class Group(NamedTuple):
    """One key's jobs of an enqueue: they share a line."""

    queue: str
    priority: int
    key: str


class Line(NamedTuple):
    """What the database says of a key's line (each time aware, in UTC)."""

    head: dt.datetime | None
    """The earliest ``run_at`` of the queue's waiting fair jobs at the key's priority."""
    last: dt.datetime | None
    """The key's last place in line among its waiting jobs."""
    at_last: int
    """How many of the key's waiting jobs are at ``last``."""
    now: dt.datetime


def read_lines(alias: str, groups: Sequence[Group]) -> list[Line]:
    """Each group's line, in the order given."""
    connection = connections[alias]
    compiler = Query(None).get_compiler(connection=connection)
    now_sql, now_params = compiler.compile(DbNow())
    assert not now_params  # the clock of every backend is SQL text alone
    lines: list[Line] = []
    for start in range(0, len(groups), MAX_KEYS):
        chunk = groups[start : start + MAX_KEYS]
        params: dict[str, Any] = {}
        rows = []
        for i, group in enumerate(chunk):
            n = f"g{i}"
            rows.append(_GROUP.format(n=n))
            params.update(
                {f"{n}_i": i, f"{n}_q": group.queue, f"{n}_p": group.priority, f"{n}_k": group.key}
            )
        statement = _STATEMENT.format(now=now_sql, groups=" UNION ALL ".join(rows))
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            found = sorted(cursor.fetchall())
        lines.extend(
            Line(
                None if head is None else as_aware(head),
                None if last is None else as_aware(last),
                int(count),
                as_aware(now),
            )
            for _, head, last, count, now in found
        )
    return lines
