"""Where each fair key's next job goes in line: one statement for every key of an enqueue.

Per (queue, priority, key): the head of the queue's waiting fair jobs (the first entry of
``leasejobs_fair_head``), the key's last place in line (the last entry of its range of
``leasejobs_fair_key``) and how many of its jobs share that place (a range of the same index),
with the database's clock. The keys are a derived table of one row per key, each read by the
same three correlated subqueries, so that a bulk enqueue of many keys costs one round trip and
one small plan; only the number of rows varies in the text, never a value. The
same SQL runs on SQLite and MariaDB/MySQL (``Dialect._fair_lines``, a step of the inserts);
each partial index's condition is repeated term for term, so a database that has them can use
them. PostgreSQL has its own (``postgresql/fair_lines.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import connections

from ..db.dbtime import as_set, now_sql
from .sql import JOB, WAITING


class Columns(NamedTuple):
    """What the reads name: the head's column and its test, a place's column and its test."""

    head: str
    head_test: str
    place: str
    place_test: str


WAITING_FAIR = Columns(
    "run_at", f"{WAITING} AND fair_key IS NOT NULL", "fair_at", f"{WAITING} AND fair_at IS NOT NULL"
)
"""The columns and the partial indexes' conditions (PostgreSQL's and SQLite's)."""


def statement(columns: Columns) -> str:
    """The reads of a derived table ``g`` of keys (``{groups}``) with the clock (``{now}``).

    Each read is an ORDER BY ... LIMIT 1 on its index, never MIN() or MAX(): PostgreSQL turns
    an aggregate into that only when its statistics say it pays, and on a table filled since
    the last ANALYZE it read the whole queue's fair jobs for the head (2.7 ms at 20,000).
    """
    head, head_test, place, place_test = columns
    key = "queue = g.queue AND priority = g.priority AND fair_key = g.fair_key"
    last = f"SELECT {place} FROM {JOB} WHERE {key} AND {place_test} ORDER BY {place} DESC LIMIT 1"
    return f"""SELECT g.i,
    (SELECT {head} FROM {JOB}
     WHERE queue = g.queue AND priority = g.priority AND {head_test}
     ORDER BY {head} LIMIT 1),
    ({last}),
    (SELECT COUNT(*) FROM {JOB} WHERE {key} AND {place_test} AND {place} = ({last})),
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
    """What the database says of a key's line (each time as the rows hold them: ``as_set``)."""

    head: dt.datetime | None
    """The earliest ``run_at`` of the queue's waiting fair jobs at the key's priority."""
    last: dt.datetime | None
    """The key's last place in line among its waiting jobs."""
    at_last: int
    """How many of the key's waiting jobs are at ``last``."""
    now: dt.datetime

    @classmethod
    def of(cls, head: Any, last: Any, at_last: Any, now: Any) -> Line:
        """A line from the database's values (SQLite's times are text)."""
        return cls(
            None if head is None else as_set(head),
            None if last is None else as_set(last),
            int(at_last),
            as_set(now),
        )


def read_lines(alias: str, groups: Sequence[Group], columns: Columns = WAITING_FAIR) -> list[Line]:
    """Each group's line, in the order given."""
    connection = connections[alias]
    clock, clock_params = now_sql(connection)
    assert not clock_params  # the clock of every backend is SQL text alone
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
        text = statement(columns).format(now=clock, groups=" UNION ALL ".join(rows))
        with connection.cursor() as cursor:
            cursor.execute(text, params)
            found = sorted(cursor.fetchall())
        lines.extend(Line.of(*row[1:]) for row in found)
    return lines
