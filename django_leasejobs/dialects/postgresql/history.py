"""PostgreSQL's job table in partitions: the live jobs in one, finished jobs by state and time.

``django_leasejobs_job`` is partitioned by ``in_history``. FALSE rows (waiting and running jobs)
are ``..._job_live``, a plain table with every index and unique key the claims and enqueues
use. TRUE rows are the finished jobs: a final state writes the flag in the same UPDATE and
PostgreSQL moves the row to ``..._job_history``, partitioned by state and each state by range
of ``finished_at`` (``LEASEJOBS_HISTORY_PARTITION`` wide, epoch-aligned, named by the lower
bound in UTC). Claims, heartbeats, the live indexes and their vacuum never see a finished row,
and retention drops a whole partition once its upper bound is past its state's age. A DEFAULT
partition per state takes what no range covers (maintenance late, or rows retention keeps),
so no final state is ever refused.

A partitioned table holds no unique index without its partition keys, so the primary key and
the unique keys (a live dedupe key per name, one job per occurrence) are the live partition's
own: each concerns live rows (a schedule's cursor, not its old jobs, keeps an occurrence from
being emitted twice). No foreign key points at the table. A write racing the move of its row
gets SQLSTATE 40001 instead of matching nothing: ``db.deadlocks`` runs it again, and then it
matches nothing, the "zero rows changed" every guarded write handles.

DDL takes no parameters: bounds are quoted by psycopg (``sql.Literal``), names are this
module's own.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from psycopg import sql

from ...models import Job
from ..sql import JOB
from .sql import LIVE

HISTORY = f"{JOB}_history"
FINAL_STATES = ("succeeded", "dead", "cancelled")
EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)

# The history's indexes (each range partition gets them as it is attached): the look-ups of
# finished jobs that the live table's indexes serve, without the claim path's ones.
HISTORY_INDEXES = {
    "id": "(id)",
    "name": "(name, id)",
    "finished": "(finished_at)",
    "dedupe": "(dedupe_key) WHERE dedupe_key IS NOT NULL",
    "ckey": "(concurrency_key) WHERE concurrency_key IS NOT NULL",
    "retried": "(retried_at) WHERE retried_at IS NOT NULL",
    "occurrence": "(schedule_id, occurrence_at) WHERE schedule_id IS NOT NULL",
    "step": "(workflow_step_id) WHERE workflow_step_id IS NOT NULL",
}


class Partition(NamedTuple):
    """One range partition of a state's history."""

    name: str
    lower: dt.datetime
    upper: dt.datetime


def state_table(state: str) -> str:
    """The partitioned table of one final state's history."""
    if state not in FINAL_STATES:
        raise ValueError(f"History is kept for {', '.join(FINAL_STATES)}, not {state!r}.")
    return f"{JOB}_{state}"


def is_partitioned(cursor: Any) -> bool:
    """Whether the job table is partitioned (migration 0026 ran on PostgreSQL)."""
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [JOB])
    row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def _columns() -> sql.Composable:
    """The job table's columns, for copying rows between its partitions by name."""
    names = [field.column for field in Job._meta.concrete_fields if field.column]
    return sql.SQL(", ").join([sql.Identifier(name) for name in names])


def _run(cursor: Any, statement: sql.Composable) -> None:
    cursor.execute(statement.as_string(cursor.connection))


def check_live_rows(cursor: Any) -> None:
    """Migration, first step: prove every row of the job table is a live partition's row (a
    CHECK added NOT VALID, then validated: a scan that takes no lock writers wait for), so the
    attach that follows needs no scan under its lock."""
    _run(
        cursor,
        sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
            sql.Identifier(JOB), sql.Identifier(f"{JOB}_is_live")
        ),
    )  # left by a migration stopped after this step: made again
    _run(
        cursor,
        sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} CHECK (NOT in_history) NOT VALID").format(
            sql.Identifier(JOB), sql.Identifier(f"{JOB}_is_live")
        ),
    )
    _run(
        cursor,
        sql.SQL("ALTER TABLE {} VALIDATE CONSTRAINT {}").format(
            sql.Identifier(JOB), sql.Identifier(f"{JOB}_is_live")
        ),
    )


def partition_job_table(cursor: Any, now: dt.datetime, spans: dict[str, dt.timedelta]) -> None:
    """Migration, second step (one transaction, a short lock): the job table becomes the live
    partition of a new partitioned table of the same name, with the history beside it. Its id
    sequence moves to the new table and goes on from where it was."""
    table, live = sql.Identifier(JOB), sql.Identifier(LIVE)
    _run(cursor, sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
    cursor.execute(
        "SELECT attidentity FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'id'",
        [JOB],
    )
    identity = cursor.fetchone()[0]
    cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))", [JOB])
    next_id = cursor.fetchone()[0]
    _run(cursor, sql.SQL("ALTER TABLE {} RENAME TO {}").format(table, live))
    _run(
        cursor,
        sql.SQL(
            "CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) "
            "PARTITION BY LIST (in_history)"
        ).format(table, live),
    )
    _run(
        cursor,
        sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
            table, sql.Identifier(f"{JOB}_is_live")
        ),
    )
    if identity:
        _run(cursor, sql.SQL("ALTER TABLE {} ALTER COLUMN id DROP IDENTITY").format(live))
        _run(
            cursor,
            sql.SQL(
                "ALTER TABLE {} ALTER COLUMN id "
                "ADD GENERATED BY DEFAULT AS IDENTITY (START WITH {})"
            ).format(table, sql.Literal(next_id)),
        )
    else:  # a serial column: its sequence now belongs to the new table
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [LIVE])
        sequence = cursor.fetchone()[0]
        _run(cursor, sql.SQL("ALTER TABLE {} ALTER COLUMN id DROP DEFAULT").format(live))
        _run(
            cursor,
            sql.SQL("ALTER SEQUENCE {} OWNED BY {}.id").format(sql.SQL(sequence), table),
        )
    _run(
        cursor,
        sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES IN (FALSE)").format(table, live),
    )
    _run(
        cursor,
        sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(live, sql.Identifier(f"{JOB}_is_live")),
    )
    history = sql.Identifier(HISTORY)
    _run(
        cursor,
        sql.SQL(
            "CREATE TABLE {} PARTITION OF {} FOR VALUES IN (TRUE) PARTITION BY LIST (status)"
        ).format(history, table),
    )
    for suffix, columns in HISTORY_INDEXES.items():
        _run(
            cursor,
            sql.SQL("CREATE INDEX {} ON {} " + columns).format(
                sql.Identifier(f"{HISTORY}_{suffix}"), history
            ),
        )
    for state in FINAL_STATES:
        parent = sql.Identifier(state_table(state))
        _run(
            cursor,
            sql.SQL(
                "CREATE TABLE {} PARTITION OF {} FOR VALUES IN ({}) "
                "PARTITION BY RANGE (finished_at)"
            ).format(parent, history, sql.Literal(state)),
        )
        _run(
            cursor,
            sql.SQL("CREATE TABLE {} PARTITION OF {} DEFAULT").format(
                sql.Identifier(f"{state_table(state)}_default"), parent
            ),
        )
    make_ahead(cursor, now, spans)


def unpartition_job_table(cursor: Any) -> None:
    """Migration 0026 reversed (one transaction): the history's rows go back into the live
    partition, which becomes the job table again, its id sequence going on where it was."""
    table, live = sql.Identifier(JOB), sql.Identifier(LIVE)
    _run(cursor, sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
    cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))", [JOB])
    next_id = cursor.fetchone()[0]
    _run(cursor, sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(table, live))
    # The foreign key's deferred checks of the rows written back run now, not at the commit:
    # a table with pending checks cannot be altered.
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    # The table's columns as they are, not as the model has them: a later migration
    # reversed before this one (0027's fair columns) has already dropped its own.
    columns = _table_columns(cursor, LIVE)
    _run(
        cursor,
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
            live, columns, columns, sql.Identifier(HISTORY)
        ),
    )
    _run(cursor, sql.SQL("DROP TABLE {}").format(table))
    _run(cursor, sql.SQL("ALTER TABLE {} RENAME TO {}").format(live, table))
    _run(
        cursor,
        sql.SQL(
            "ALTER TABLE {} ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (START WITH {})"
        ).format(table, sql.Literal(next_id)),
    )


def _table_columns(cursor: Any, table: str) -> sql.Composable:
    """A table's columns as the catalog has them, in their order."""
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum",
        [table],
    )
    return sql.SQL(", ").join([sql.Identifier(row[0]) for row in cursor.fetchall()])


def floor(moment: dt.datetime, span: dt.timedelta) -> dt.datetime:
    """The start of the epoch-aligned span that holds ``moment``."""
    return EPOCH + ((moment - EPOCH) // span) * span


_BOUND = re.compile(r"FROM \('([^']+)'\) TO \('([^']+)'\)")


def partitions(cursor: Any, state: str) -> list[Partition]:
    """A state's range partitions, oldest first (the DEFAULT one is not among them)."""
    cursor.execute(
        """SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
        FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = %s::regclass""",
        [state_table(state)],
    )
    found = []
    for name, bound in cursor.fetchall():
        match = _BOUND.search(bound)
        if match:
            lower, upper = (dt.datetime.fromisoformat(text) for text in match.groups())
            found.append(Partition(name, lower, upper))
    return sorted(found, key=lambda partition: partition.lower)


def ahead_of(span: dt.timedelta) -> dt.timedelta:
    """How far past now partitions are made: a span, and ten minutes at least (a finish past
    them lands in the DEFAULT partition: nothing is refused)."""
    return max(span, dt.timedelta(minutes=10))


def _spans(start: dt.datetime, end: dt.datetime, span: dt.timedelta) -> Iterator[dt.datetime]:
    while start < end:
        yield start
        start += span


def make_ahead(cursor: Any, now: dt.datetime, spans: dict[str, dt.timedelta]) -> list[str]:
    """Make the partitions of each state in ``spans`` (its span) from where its last one ends
    (or the current span) to ``ahead_of(span)`` past ``now``; return the names made. A state
    not in ``spans`` has none made: its history stays in its DEFAULT partition.

    Each is made as a table of its own and then attached: an attach takes a lock that lets the
    state's writers and readers go on (a ``PARTITION OF`` creation would stop them), and its
    check of the DEFAULT partition reads only the rows there. A span whose rows are already in
    the DEFAULT partition (maintenance was late) is skipped: they stay there, and retention
    deletes them. The states go in the order a read of the whole table locks their tables
    (by name): in another order an attach's lock of one state's DEFAULT partition and a
    reader's of another's made a deadlock.
    """
    made = []
    for state, span in sorted(spans.items()):  # the states' partitions' order (by name)
        existing = partitions(cursor, state)
        start = floor(now, span)
        if existing and existing[-1].upper > start:
            start = existing[-1].upper
        for lower in _spans(start, now + ahead_of(span), span):
            name = f"{state_table(state)}_{lower:%Y%m%d_%H%M}"
            if _attach(cursor, state, name, lower, lower + span):
                made.append(name)
    return made


def make_since(
    cursor: Any, since: dt.datetime, now: dt.datetime, spans: dict[str, dt.timedelta]
) -> list[str]:
    """Make the partitions of each state in ``spans`` back from where its first one starts to
    the span that holds ``since`` (for finished rows older than the table's partitions, moved
    in by ``movejobhistory``); return the names made."""
    made = []
    for state, span in sorted(spans.items()):  # the order of make_ahead's locks
        existing = partitions(cursor, state)
        end = existing[0].lower if existing else floor(now, span)
        for lower in _spans(floor(since, span), end, span):
            name = f"{state_table(state)}_{lower:%Y%m%d_%H%M}"
            if _attach(cursor, state, name, lower, lower + span):
                made.append(name)
    return made


def _attach(cursor: Any, state: str, name: str, lower: dt.datetime, upper: dt.datetime) -> bool:
    parent, table = sql.Identifier(state_table(state)), sql.Identifier(name)
    cursor.execute("SAVEPOINT leasejobs_attach")
    try:
        _run(
            cursor,
            sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)").format(
                table, parent
            ),
        )
        _run(
            cursor,
            sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})").format(
                parent, table, sql.Literal(lower), sql.Literal(upper)
            ),
        )
    except Exception as exc:
        # A DEFAULT partition holding the span's rows, or the lock timeout (readers hold the
        # table): the span is made at the next try.
        if getattr(exc.__cause__ or exc, "sqlstate", None) not in ("23514", "55P03"):
            raise
        cursor.execute("ROLLBACK TO SAVEPOINT leasejobs_attach")
        return False
    cursor.execute("RELEASE SAVEPOINT leasejobs_attach")
    return True


def detach_and_drop(cursor: Any, state: str, partition: Partition, kept: Sequence[int]) -> None:
    """Drop one range partition (in the caller's short transaction): detached first, so the
    rows retention must keep (``kept``: a replay's job while its dead letter exists, a running
    workflow's jobs) can be written back, into the state's DEFAULT partition."""
    parent, table = sql.Identifier(state_table(state)), sql.Identifier(partition.name)
    default = sql.Identifier(f"{state_table(state)}_default")
    # The locks in the order a read of the whole table takes them (the state's table, then its
    # partitions by bound, the DEFAULT one last): the DETACH alone locked the DEFAULT partition
    # before this one, and a reader holding this one and waiting for it made a deadlock.
    for name in (parent, table, default):
        _run(cursor, sql.SQL("LOCK TABLE ONLY {} IN ACCESS EXCLUSIVE MODE").format(name))
    _run(cursor, sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(parent, table))
    if kept:
        columns = _columns()
        cursor.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} WHERE id = ANY(%s)")
            .format(sql.Identifier(JOB), columns, columns, table)
            .as_string(cursor.connection),
            [list(kept)],
        )
    _run(cursor, sql.SQL("DROP TABLE {}").format(table))
