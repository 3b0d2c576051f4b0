"""PostgreSQL: each operation in as few statements as it can: SKIP LOCKED, RETURNING, arrays.

Every statement is named here (the claims in ``claims``, the limited claim's in
``postgresql_limited``, the INSERTs in ``postgresql_insert``), beside the reason for its shape,
with named parameters and the fragments it shares written once in ``sql``. The id and attempt
arrays travel as one text parameter each (``int_array``), which psycopg does not have to adapt
element by element.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import JSONField

from ...db.deadlocks import retry_deadlocks
from ...models import Job
from .. import fair_lines, fair_stamps
from ..base.dialect import (
    Completed,
    Completion,
    Counted,
    Dialect,
    LogRow,
    Renewed,
    StepsCompleted,
    Token,
)
from ..base.within_limits import CANDIDATES_PER_SLOT, Bucket, Fill
from . import claim_table, client_encoding, job_rows, notify, replication_status
from . import fair_lines as postgresql_fair_lines
from . import insert as postgresql_insert
from . import job_logs as postgresql_job_logs
from . import limited as postgresql_limited
from . import steps as postgresql_steps
from .claims import CLAIMS
from .sql import (
    JOB,
    SUCCEEDED_SET,
    TOKENS,
)
from .timestamps import timestamps_in_c

RENEW = f"""
UPDATE {JOB} AS j
SET lease_expires_at = STATEMENT_TIMESTAMP()
    + make_interval(secs => COALESCE(j.lease_seconds, %(lease_seconds)s))
FROM unnest(%(ids)s::bigint[], %(attempts)s::bigint[]) AS t(id, attempt)
WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running'
  AND j.lease_owner = %(worker_id)s
-- The cancel request travels back with the renewal: no second statement per heartbeat.
RETURNING j.id, j.cancel_requested_at IS NOT NULL
"""

# A plain job's success. A batch holding a workflow's job is not written at all ("steps" names
# those jobs): the protocol completes such a batch with its steps in one transaction, and one
# statement that wrote the plain jobs in autocommit would have committed them before that.
# Whether a job is a workflow's never changes, so the test reads the statement's snapshot;
# only running rows can be completed, so it reads the live partition alone (the status is
# the history's partition key: PostgreSQL leaves the history out when planning).
_COMPLETE_MANY = f"""
WITH steps AS (
    SELECT id FROM {JOB}
    WHERE id = ANY(%(ids)s::bigint[]) AND workflow_step_id IS NOT NULL AND status = 'running'
),
done AS (
    UPDATE {JOB} AS j
    SET {SUCCEEDED_SET}
    FROM {TOKENS}
    WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running'
        AND j.workflow_step_id IS NULL AND NOT EXISTS (SELECT 1 FROM steps)
    RETURNING j.id
),{{logs}}
chunks AS (
    SELECT array_agg(id) AS ids FROM (
        SELECT id, (row_number() OVER () - 1) / %(ids_per_notification)s AS chunk FROM done
    ) AS numbered GROUP BY chunk
)
SELECT 'steps', array_agg(id), '' FROM steps HAVING count(*) > 0
UNION ALL
SELECT 'done', ids, {{announce}} FROM chunks
"""

_NOT_ANNOUNCED = "''"
# Announcing what it completed to waiting callers in the same statement (so in the same
# transaction, and no round trip more): one notification per chunk of ids. ``pg_notify``
# returns void: cast to text and cut to nothing, it fills the third column.
_ANNOUNCED = "left(pg_notify(%(finished_channel)s, array_to_string(ids, ','))::text, 0)"

COMPLETE_MANY = _COMPLETE_MANY.format(announce=_NOT_ANNOUNCED, logs="")
"""One row per chunk of the ids completed (and one naming the workflow jobs, if any)."""

COMPLETE_MANY_ANNOUNCED = _COMPLETE_MANY.format(announce=_ANNOUNCED, logs="")

# With the first attempts' logs of the batch (``logs=``): the rows of the jobs this statement
# completed are inserted by the same statement, so a batch that logged costs one round trip
# and one commit, as one that did not (no transaction, savepoint and insert around it).
COMPLETE_MANY_LOGGED = _COMPLETE_MANY.format(
    announce=_NOT_ANNOUNCED, logs=postgresql_job_logs.LOGGED
)
COMPLETE_MANY_ANNOUNCED_LOGGED = _COMPLETE_MANY.format(
    announce=_ANNOUNCED, logs=postgresql_job_logs.LOGGED
)

ANNOUNCE_FINISHED = (
    "SELECT pg_notify(%(channel)s, payload) FROM unnest(%(payloads)s::text[]) AS payload"
)

ANNOUNCE = "SELECT pg_notify(%(channel)s, queue) FROM unnest(%(queues)s::text[]) AS queue"

# The job id is the payload: every worker listening hears it, only the owner acts on it.
ANNOUNCE_CANCEL = "SELECT pg_notify(%(channel)s, %(job_id)s)"


def int_array(values: Iterable[int]) -> str:
    """A PostgreSQL array of integers as one text parameter; ``int()`` keeps it an array of
    integers whatever was passed."""
    return "{" + ",".join(str(int(value)) for value in values) + "}"


class PostgreSQLDialect(Dialect):
    notifies = True
    replication = replication_status.READER

    def insert(self, alias: str, values: dict[str, Any]) -> Job:
        return postgresql_insert.insert_one(values, alias)

    def insert_many(self, alias: str, rows: Iterable[dict[str, Any]]) -> list[Job]:
        stamped = fair_stamps.stamped(self._fair_lines, alias, rows)
        return postgresql_insert.insert_many(stamped, alias)

    def announce(self, alias: str, queues: Sequence[str]) -> None:
        if queues and notify.supported(alias):
            with connections[alias].cursor() as cursor:
                cursor.execute(ANNOUNCE, {"channel": notify.CHANNEL, "queues": list(queues)})

    def announce_cancel(self, alias: str, job_id: int) -> None:
        if notify.supported(alias):
            with connections[alias].cursor() as cursor:
                params = {"channel": notify.CANCEL_CHANNEL, "job_id": str(int(job_id))}
                cursor.execute(ANNOUNCE_CANCEL, params)

    def announce_finished(self, alias: str, ids: Sequence[int]) -> None:
        if ids and notify.supported(alias):
            payloads = notify.finished_payloads(list(ids))
            with connections[alias].cursor() as cursor:
                params: dict[str, Any] = {"channel": notify.FINISHED_CHANNEL, "payloads": payloads}
                cursor.execute(ANNOUNCE_FINISHED, params)

    def _claim(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
    ) -> list[Job]:
        params: dict[str, Any] = {
            "worker_id": worker_id,
            "lease_seconds": lease_seconds,
            "batch": batch,
            "spare": 2 * batch,
        }
        connection = connections[alias]
        if queues is not None and len(queues) == 1:
            params["queue"] = queues[0]
            return claim_table.read(
                alias,
                lambda table: fetch_jobs(connection, alias, CLAIMS[table].one_queue, params),
            )
        if queues is not None:
            params["queues"] = list(queues)

        def claim(table: str) -> list[Job]:
            claims = CLAIMS[table]
            sql = claims.every_queue if queues is None else claims.given_queues
            jobs = fetch_jobs(connection, alias, sql, params)
            if not jobs:
                # The candidates come from the statement's snapshot: rows a concurrent claimer
                # committed after it (still waiting in it) and rows it is locking now can be
                # all of them, and this claim comes back empty while jobs are due, which sends
                # a worker to sleep (or a --burst worker home). A second statement has a newer
                # snapshot; where nothing is due it costs one more cheap probe of the index.
                jobs = fetch_jobs(connection, alias, sql, params)
            return jobs

        return claim_table.read(alias, claim)

    def claim_limited(
        self,
        alias: str,
        worker_id: str,
        queues: Sequence[str] | None,
        batch: int,
        lease_seconds: float,
    ) -> list[Job]:
        # The candidates are read under the locks, in the statement that takes them
        # (postgresql_limited.HOLD): no limiter row is written to lock a key.
        if not self._limited_due(alias, queues, batch):
            return self._claim(alias, worker_id, queues, batch, lease_seconds)
        count = batch * CANDIDATES_PER_SLOT
        with transaction.atomic(using=alias):
            held = postgresql_limited.hold(alias, queues, count, batch)
            jobs = self._start_within_limits(alias, worker_id, held, batch, lease_seconds)
        return self._claim_rest(alias, worker_id, queues, batch, lease_seconds, held, jobs)

    def _limited_due(self, alias: str, queues: Sequence[str] | None, batch: int) -> bool:
        # Any due job with limits, anywhere: leasejobs_limited holds only them.
        return postgresql_limited.limited_due(alias, queues)

    def _limiter_state(
        self, alias: str, concurrency_keys: set[str], rate_keys: set[str]
    ) -> tuple[dict[str, int], dict[str, Bucket]]:
        return postgresql_limited.limiter_state(alias, sorted(concurrency_keys), sorted(rate_keys))

    def _fill_buckets(self, alias: str, fills: dict[str, Fill]) -> None:
        postgresql_limited.fill_buckets(alias, fills)

    def _take(self, alias: str, worker_id: str, ids: list[int], lease_seconds: float) -> list[Job]:
        params = {"worker_id": worker_id, "lease_seconds": lease_seconds, "ids": int_array(ids)}
        connection = connections[alias]
        return claim_table.read(
            alias,
            lambda table: fetch_jobs(connection, alias, postgresql_limited.TAKE[table], params),
        )

    def prune_limiters(
        self, alias: str, older_than: dt.timedelta, batch: int, after_key: str
    ) -> tuple[int, str]:
        return postgresql_limited.prune_limiters(alias, older_than, batch, after_key)

    def renew(
        self, alias: str, worker_id: str, tokens: list[Token], lease_seconds: float
    ) -> Renewed:
        params: dict[str, Any] = {
            "lease_seconds": lease_seconds,
            "ids": int_array(token.id for token in tokens),
            "attempts": int_array(token.attempt for token in tokens),
            "worker_id": worker_id,
        }
        with connections[alias].cursor() as cursor:
            cursor.execute(RENEW, params)
            rows = cursor.fetchall()
        return Renewed({row[0] for row in rows}, {row[0] for row in rows if row[1]})

    def _fair_lines(self, alias: str, groups: Sequence[fair_lines.Group]) -> list[fair_lines.Line]:
        # Its own statement: the keys as arrays (an enqueue()'s INSERT reads in itself).
        return postgresql_fair_lines.read_lines(alias, groups)

    def insert_logs(self, alias: str, rows: Sequence[LogRow]) -> None:
        postgresql_job_logs.insert(alias, rows)

    def complete_one(self, alias: str, completion: Completion, finished_by: str) -> bool:
        if not notify.supported(alias):
            return super().complete_one(alias, completion, finished_by)
        # The grouped statement announces in the same statement: no second round trip.
        return bool(self.complete_many(alias, [completion], finished_by).jobs)

    @retry_deadlocks
    def complete_many(
        self,
        alias: str,
        completions: list[Completion],
        finished_by: str,
        logs: Sequence[LogRow] = (),
    ) -> Completed:
        results = None  # no result at all: NULL, and every row's result is NULL
        if any(c.result is not None for c in completions):
            results = json.dumps([c.result for c in completions])
        params: dict[str, Any] = {
            "finished_by": finished_by,
            "results": results,
            "ids": int_array(c.id for c in completions),
            "attempts": int_array(c.attempt for c in completions),
            "ids_per_notification": notify.IDS_PER_NOTIFICATION,
        }
        announced = notify.supported(alias)
        if announced:
            params["finished_channel"] = notify.FINISHED_CHANNEL
        if logs:
            params["logs"] = postgresql_job_logs.encoded(logs)
            sql = COMPLETE_MANY_ANNOUNCED_LOGGED if announced else COMPLETE_MANY_LOGGED
        else:
            sql = COMPLETE_MANY_ANNOUNCED if announced else COMPLETE_MANY
        with connections[alias].cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        done = Completed(set(), set())
        for kind, ids, _ in rows:
            (done.steps if kind == "steps" else done.jobs).update(ids)
        return done

    def complete_steps(
        self, alias: str, completions: list[Completion], finished_by: str
    ) -> StepsCompleted:
        return postgresql_steps.complete_steps(alias, completions, finished_by)

    def count_steps(self, alias: str, children: dict[int, int], runs: dict[int, int]) -> Counted:
        return postgresql_steps.count_steps(alias, children, runs)

    def check_sendable(self, alias: str, fields: Iterable[tuple[str, Any]]) -> None:
        connection = connections[alias]
        connection.ensure_connection()  # the session's encoding is read from the open connection
        client_encoding.check_sendable(fields, connection)

    def require_utf8(self, alias: str, action: str) -> None:
        connection = connections[alias]
        connection.ensure_connection()
        client_encoding.require_utf8(connection, action)


_COLUMN_ATTNAME = {str(f.column): str(f.attname) for f in Job._meta.concrete_fields}
_JSON = {str(f.column): f for f in Job._meta.concrete_fields if isinstance(f, JSONField)}


def fetch_jobs(
    connection: BaseDatabaseWrapper,
    alias: str,
    sql: str,
    params: Sequence[Any] | dict[str, Any],
) -> list[Job]:
    """Run ``sql`` (returning job columns by name) and load each row as ``Job.from_db`` would
    (``job_rows.builder``; a column not returned is a deferred field).

    Timestamps are parsed by psycopg's C loader (``timestamps_in_c``). Only the JSON columns
    need their field's ``from_db_value``: a test checks that no other field of ``Job`` has a
    converter.
    """
    with connection.cursor() as cursor:
        timestamps_in_c(cursor.cursor)
        cursor.execute(sql, params)
        columns = [str(column[0]) for column in cursor.description]
        rows = cursor.fetchall()
    json_columns = [
        (i, field, field.get_col(Job._meta.db_table))
        for i, field in ((i, _JSON.get(c)) for i, c in enumerate(columns))
        if field is not None
    ]
    names = [_COLUMN_ATTNAME[c] for c in columns]
    build = job_rows.builder(alias)
    jobs = []
    for row in rows:
        values = list(row)
        for i, field, expression in json_columns:
            values[i] = field.from_db_value(values[i], expression, connection)
        jobs.append(build(dict(zip(names, values, strict=True))))
    return jobs
