"""PostgreSQL: each step in one statement, with SKIP LOCKED, RETURNING and arrays.

Every statement is named here, beside the reason for its shape. Values are parameters; the
id and attempt arrays travel as one text parameter each (``int_array``), which psycopg does not
have to adapt element by element.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DEFERRED, JSONField

from .. import notify
from ..deadlocks import retry_deadlocks
from ..models import Job, Pause
from . import limiter_pruning, postgresql_insert, postgresql_limited, workers
from .base import Completion, Dialect, Renewed, Token
from .limited import Bucket, Held

_CLAIM_SET = """
UPDATE {table} AS j
SET status = 'running',
    attempt = j.attempt + 1,
    lease_owner = %s,
    lease_expires_at = STATEMENT_TIMESTAMP()
        + make_interval(secs => COALESCE(j.lease_seconds, %s)),
    started_at = STATEMENT_TIMESTAMP()
-- ANY(ARRAY(...)) rather than a join with "due": the planner then always fetches the claimed
-- rows by primary key, where a join may hash the whole table (a seq scan per claim).
-- The status test again: the compare-and-set, in case the row changed after the snapshot.
WHERE j.id = ANY(ARRAY(SELECT id FROM due)) AND j.status IN ('pending', 'failed')
RETURNING {columns}
"""

CLAIM_ONE_QUEUE = (
    """
WITH due AS (
    SELECT id FROM {table}
    WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP() AND queue = %s
      -- Pauses: the queue's test names no column of the row, so it is checked once, before
      -- the scan (a paused queue reads no job); a paused job name is filtered row by row.
      AND NOT EXISTS (SELECT 1 FROM {pause} AS p WHERE p.kind = 'queue' AND p.name = %s)
      AND {job_not_paused}
      AND concurrency_key IS NULL AND rate_key IS NULL
    ORDER BY priority DESC, run_at, id
    LIMIT %s
    -- SKIP LOCKED: a row another claimer is taking is passed over, not waited for, so
    -- concurrent workers split the due rows instead of queueing behind one another.
    FOR UPDATE SKIP LOCKED
)"""
    + _CLAIM_SET
)

# Several queues, or all of them. The claimable index leads with the queue, so one ordered scan
# cannot serve them all (PostgreSQL would sort every due row on each claim, a cost that grows
# with the backlog). Instead: list the queues (given, or found with a loose index scan that
# reads one index entry per queue), take the first ``batch`` due rows of each queue from the
# index, and keep the best ``batch`` of those. Rows locked but not kept are freed at commit.
CLAIM_QUEUES = (
    """
WITH RECURSIVE queues(queue) AS ({queues}),
due AS (
    SELECT c.id FROM queues AS q CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {table}
        WHERE status IN ('pending', 'failed') AND run_at <= STATEMENT_TIMESTAMP()
          AND queue = q.queue AND concurrency_key IS NULL AND rate_key IS NULL
          AND {job_not_paused}
        ORDER BY priority DESC, run_at, id
        LIMIT %s
        FOR UPDATE SKIP LOCKED
    ) AS c
    -- A paused queue is dropped from the list before its rows are read.
    WHERE q.queue IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM {pause} AS p WHERE p.kind = 'queue' AND p.name = q.queue)
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT %s
)"""
    + _CLAIM_SET
)

# An anti-join on the pause table's unique index: the claim keeps its ordered index scan. (A
# "name <> ALL(ARRAY(...))" test is estimated to keep almost no row, and the planner then
# sorts the whole backlog instead.)
JOB_NOT_PAUSED = (
    "NOT EXISTS (SELECT 1 FROM {pause} AS p WHERE p.kind = 'job' AND p.name = {table}.name)"
)

GIVEN_QUEUES = "SELECT unnest(%s::text[])"
# {kind}: which claimable index the loose scan reads (the predicate of its partial index).
EVERY_QUEUE = """
    (SELECT queue FROM {table} WHERE status IN ('pending', 'failed') AND {kind}
     ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT t.queue FROM {table} AS t
            WHERE t.status IN ('pending', 'failed') AND {kind} AND t.queue > q.queue
            ORDER BY t.queue LIMIT 1)
    FROM {cte} AS q WHERE q.queue IS NOT NULL
"""
UNLIMITED = "concurrency_key IS NULL AND rate_key IS NULL"
LIMITED = "(concurrency_key IS NOT NULL OR rate_key IS NOT NULL)"

RENEW = """
UPDATE {table} AS j
SET lease_expires_at = STATEMENT_TIMESTAMP()
    + make_interval(secs => COALESCE(j.lease_seconds, %s))
FROM unnest(%s::bigint[], %s::bigint[]) AS t(id, attempt)
WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running' AND j.lease_owner = %s
-- The cancel request travels back with the renewal: no second statement per heartbeat.
RETURNING j.id, j.cancel_requested_at IS NOT NULL
"""

COMPLETE_MANY = """
UPDATE {table} AS j
SET status = 'succeeded', finished_at = STATEMENT_TIMESTAMP(), lease_owner = '',
    finished_by = %s, lease_expires_at = NULL, live_dedupe_key = NULL,
    -- The results come as one JSON array (one text parameter, cheap to send; a jsonb[]
    -- parameter is quoted element by element), the n-th for the n-th id. JSON null and
    -- "no result" are both stored as SQL NULL, as complete() does.
    result = NULLIF(%s::jsonb -> (t.n::int - 1), 'null'::jsonb)
FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS t(id, attempt, n)
WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running'
RETURNING j.id
"""

# The same UPDATE, announcing what it completed to waiting callers in the same statement (so
# in the same transaction, and no round trip more): one notification per chunk of ids, one
# row per chunk back. The ids of a completion group come back as an array of each chunk.
COMPLETE_MANY_ANNOUNCED = (
    "WITH done AS ("
    + COMPLETE_MANY
    + """),
chunks AS (
    SELECT array_agg(id) AS ids FROM (
        SELECT id, (row_number() OVER () - 1) / %s AS chunk FROM done
    ) AS numbered GROUP BY chunk
)
SELECT ids, pg_notify(%s, array_to_string(ids, ',')) FROM chunks
"""
)

ANNOUNCE_FINISHED = "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload"

ANNOUNCE = "SELECT pg_notify(%s, queue) FROM unnest(%s::text[]) AS queue"

# The job id is the payload: every worker listening hears it, only the owner acts on it.
ANNOUNCE_CANCEL = "SELECT pg_notify(%s, %s)"

# A claimed job comes back without its error history, result and last error: a worker needs
# none of them, and decoding a retried job's tracebacks on every claim is the costliest part of
# reading the rows back. Django loads them on access, like any deferred field.
NOT_CLAIMED = ("errors", "result", "last_error")


def int_array(values: Iterable[int]) -> str:
    """A PostgreSQL array of integers as one text parameter; ``int()`` keeps it an array of
    integers whatever was passed."""
    return "{" + ",".join(str(int(value)) for value in values) + "}"


class PostgreSQLDialect(Dialect):
    def upsert_worker(self, alias: str, row: dict[str, Any]) -> None:
        workers.upsert(alias, row, workers.on_conflict)

    def insert(self, values: dict[str, Any], alias: str) -> Job:
        return postgresql_insert.insert_one(values, alias)

    def insert_many(self, rows: Iterable[dict[str, Any]], alias: str) -> list[Job]:
        return postgresql_insert.insert_many(rows, alias)

    def announce(self, alias: str, queues: Sequence[str]) -> None:
        if queues and notify.supported(alias):
            with connections[alias].cursor() as cursor:
                cursor.execute(ANNOUNCE, [notify.CHANNEL, list(queues)])

    def announce_cancel(self, alias: str, job_id: int) -> None:
        if notify.supported(alias):
            with connections[alias].cursor() as cursor:
                cursor.execute(ANNOUNCE_CANCEL, [notify.CANCEL_CHANNEL, str(int(job_id))])

    def announces_finished(self, alias: str) -> bool:
        return notify.supported(alias)

    def announce_finished(self, alias: str, ids: Sequence[int]) -> None:
        if ids and notify.supported(alias):
            payloads = notify.finished_payloads(list(ids))
            with connections[alias].cursor() as cursor:
                cursor.execute(ANNOUNCE_FINISHED, [notify.FINISHED_CHANNEL, payloads])

    def claim(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
    ) -> list[Job]:
        table, columns = _table(alias), _columns(alias)
        pause = connections[alias].ops.quote_name(Pause._meta.db_table)
        not_paused = JOB_NOT_PAUSED.format(pause=pause, table=table)
        if queues is not None and len(queues) == 1:
            sql = CLAIM_ONE_QUEUE.format(
                table=table, columns=columns, pause=pause, job_not_paused=not_paused
            )
            params: list[Any] = [queues[0], queues[0], batch, worker_id, lease_seconds]
        else:
            if queues is None:
                source = EVERY_QUEUE.format(table=table, kind=UNLIMITED, cte="queues")
                source_params = []
            else:
                source, source_params = GIVEN_QUEUES, [list(queues)]
            sql = CLAIM_QUEUES.format(
                table=table, columns=columns, queues=source, pause=pause, job_not_paused=not_paused
            )
            params = [*source_params, batch, batch, worker_id, lease_seconds]
        return fetch_jobs(connections[alias], alias, sql, params)

    def limited_due(self, alias: str, queues: Sequence[str] | None, batch: int) -> bool:
        # Any due job with limits, anywhere: leasejobs_limited holds only them.
        return postgresql_limited.limited_due(alias, queues, self._every_queue(alias))

    def read_limited(
        self, alias: str, queues: Sequence[str] | None, count: int, batch: int
    ) -> Held | None:
        return None  # the candidates are read under the locks, in hold_limited

    def hold_limited(
        self, alias: str, queues: Sequence[str] | None, count: int, batch: int, first: Held | None
    ) -> Held:
        return postgresql_limited.hold(alias, queues, count, batch, self._every_queue(alias))

    @staticmethod
    def _every_queue(alias: str) -> Callable[[bool, str], str]:
        """The loose index scan of the queues with due jobs with limits (or without)."""

        def every_queue(limited: bool, cte: str) -> str:
            kind = LIMITED if limited else UNLIMITED
            return EVERY_QUEUE.format(table=_table(alias), kind=kind, cte=cte)

        return every_queue

    def limiter_state(
        self, alias: str, concurrency_keys: set[str], rate_keys: set[str]
    ) -> tuple[dict[str, int], dict[str, Bucket]]:
        return postgresql_limited.limiter_state(alias, sorted(concurrency_keys), sorted(rate_keys))

    def fill_buckets(self, alias: str, fills: dict[str, tuple[dt.datetime, int, int, int]]) -> None:
        postgresql_limited.fill_buckets(alias, fills)

    def prune_limiters(
        self, alias: str, older_than: dt.timedelta, batch: int, after_key: str
    ) -> tuple[int, str]:
        return limiter_pruning.prune_limiters_postgresql(alias, older_than, batch, after_key)

    def take(self, alias: str, worker_id: str, ids: list[int], lease_seconds: float) -> list[Job]:
        sql = postgresql_limited.TAKE.format(
            table=_table(alias),
            columns=_columns(alias),
            j_not_paused=postgresql_limited.not_paused_sql(alias, "j"),
        )
        params = [worker_id, lease_seconds, int_array(ids)]
        return fetch_jobs(connections[alias], alias, sql, params)

    def renew(
        self, alias: str, worker_id: str, tokens: list[Token], lease_seconds: float
    ) -> Renewed:
        connection = connections[alias]
        sql = RENEW.format(table=connection.ops.quote_name(Job._meta.db_table))
        ids = int_array(token.id for token in tokens)
        attempts = int_array(token.attempt for token in tokens)
        with connection.cursor() as cursor:
            cursor.execute(sql, [lease_seconds, ids, attempts, worker_id])
            rows = cursor.fetchall()
        return Renewed({row[0] for row in rows}, {row[0] for row in rows if row[1]})

    def complete_one(self, alias: str, completion: Completion, finished_by: str) -> bool:
        if not notify.supported(alias):
            return super().complete_one(alias, completion, finished_by)
        # The grouped statement announces in the same statement: no second round trip.
        return bool(self.complete_many(alias, [completion], finished_by))

    @retry_deadlocks
    def complete_many(
        self, alias: str, completions: list[Completion], finished_by: str
    ) -> set[int]:
        connection = connections[alias]
        table = connection.ops.quote_name(Job._meta.db_table)
        ids = int_array(c.id for c in completions)
        attempts = int_array(c.attempt for c in completions)
        results = None  # no result at all: NULL, and every row's result is NULL
        if any(c.result is not None for c in completions):
            results = json.dumps([c.result for c in completions])
        params: list[Any] = [finished_by, results, ids, attempts]
        with connection.cursor() as cursor:
            if not notify.supported(alias):
                cursor.execute(COMPLETE_MANY.format(table=table), params)
                return {row[0] for row in cursor.fetchall()}
            params += [notify.IDS_PER_NOTIFICATION, notify.FINISHED_CHANNEL]
            cursor.execute(COMPLETE_MANY_ANNOUNCED.format(table=table), params)
            return {job_id for row in cursor.fetchall() for job_id in row[0]}


def _table(alias: str) -> str:
    return str(connections[alias].ops.quote_name(Job._meta.db_table))


def _columns(alias: str) -> str:
    """The columns a claim returns (``NOT_CLAIMED`` left out), as ``j.<column>``."""
    qn = connections[alias].ops.quote_name
    claimed = [f for f in Job._meta.concrete_fields if f.name not in NOT_CLAIMED]
    return ", ".join(f"j.{qn(str(f.column))}" for f in claimed)


_COLUMN_ATTNAME = {str(f.column): str(f.attname) for f in Job._meta.concrete_fields}
_ATTNAMES = [str(f.attname) for f in Job._meta.concrete_fields]
_JSON = {str(f.column): f for f in Job._meta.concrete_fields if isinstance(f, JSONField)}


def fetch_jobs(
    connection: BaseDatabaseWrapper, alias: str, sql: str, params: Sequence[Any]
) -> list[Job]:
    """Run ``sql`` (returning job columns by name) and load each row with ``Job.from_db``.

    Timestamps are parsed by psycopg's C loader (``timestamps_in_c``). Only the JSON columns
    need their field's ``from_db_value``: a test checks that no other field of ``Job`` has a
    converter.
    """
    with connection.cursor() as cursor:
        postgresql_insert.timestamps_in_c(cursor.cursor)
        cursor.execute(sql, params)
        columns = [str(column[0]) for column in cursor.description]
        rows = cursor.fetchall()
    json_columns = [
        (i, field, field.get_col(Job._meta.db_table))
        for i, field in ((i, _JSON.get(c)) for i, c in enumerate(columns))
        if field is not None
    ]
    position = {_COLUMN_ATTNAME[c]: i for i, c in enumerate(columns)}
    jobs = []
    for row in rows:
        values = list(row)
        for i, field, expression in json_columns:
            values[i] = field.from_db_value(values[i], expression, connection)
        ordered = [values[position[a]] if a in position else DEFERRED for a in _ATTNAMES]
        jobs.append(Job.from_db(alias, _ATTNAMES, ordered))
    return jobs
