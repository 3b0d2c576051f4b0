"""Read claimed rows straight into ``Job`` instances, at a fraction of a raw queryset's cost.

A worker reads every job it runs back from its claim statement, so the per-row cost of turning
a row into a model instance is paid once per job. Through ``Manager.raw()`` most of the claim's
Python time went there (profiled: half of a no-op worker's time): Django's PostgreSQL
time-zone loader parses each timestamp in Python (about 10 µs a value, five per row), and the
raw queryset resolves columns and runs converters row by row. Here timestamps are parsed by
psycopg's C loader, only the JSON columns go through their field's ``from_db_value`` (what
Django would call), and each row becomes a ``Job`` through ``instances()``.

The instances are the ones a queryset would build: the same values, ``_state.db`` set, columns
not selected left deferred (loaded on access).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DEFERRED, JSONField
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from .models import Job

_FIELDS = Job._meta.concrete_fields
_ATTNAMES = [f.attname for f in _FIELDS]
_ATTNAME = {str(f.column): str(f.attname) for f in _FIELDS}
# The fields whose values Django converts after loading (JSON text from the driver); a test
# checks that no other field of Job has a converter.
_JSON = {str(f.column): f for f in _FIELDS if isinstance(f, JSONField)}


def parse_timestamps_in_c(cursor: Any) -> None:
    """Let psycopg's C loader parse ``timestamptz`` on this cursor only.

    Django registers a Python subclass of psycopg's loader (it swaps in the connection's zone).
    With ``USE_TZ`` the session runs in UTC (or the database's ``TIME_ZONE``), and the C loader
    returns aware datetimes in that same session zone: the same instants, so the instances
    compare and save exactly as Django's own would. Without ``USE_TZ`` Django's naive values
    are kept.
    """
    if not settings.USE_TZ:
        return
    try:
        from psycopg.types.datetime import TimestamptzLoader
    except ImportError:  # psycopg2: its C loader is already in use
        return
    adapters = getattr(cursor, "adapters", None)
    if adapters is not None:
        adapters.register_loader("timestamptz", TimestamptzLoader)


def instances(alias: str, rows: Iterable[dict[str, Any]]) -> list[Job]:
    """``Job`` instances loaded from ``alias``, one per dict of field values by attname (fields
    left out are deferred), as ``Model.from_db`` builds them, at a tenth of its cost.

    ``Model.__init__`` sets each of the two dozen fields through ``setattr`` and sends
    ``pre_init`` / ``post_init``: 25-30 µs a job, more than the database's own work for a bulk
    enqueue's row. With no receiver for those signals, the dict becomes the instance's
    ``__dict__`` (each row's dict must be the caller's own, new one): the same instance
    (``Job`` has no data descriptor but the foreign key's id, whose setter only drops a cached
    related object a new instance cannot have). With a receiver connected (a field tracker,
    say), every instance goes through ``from_db`` so the receiver sees it.
    """
    if pre_init.has_listeners(Job) or post_init.has_listeners(Job):
        return [
            Job.from_db(alias, _ATTNAMES, [row.get(a, DEFERRED) for a in _ATTNAMES]) for row in rows
        ]
    new = object.__new__
    jobs = []
    for row in rows:
        job = new(Job)
        state = ModelState()
        state.adding = False
        state.db = alias
        row["_state"] = state
        job.__dict__ = row
        jobs.append(job)
    return jobs


def fetch_jobs(
    connection: BaseDatabaseWrapper, alias: str, sql: str, params: Sequence[Any]
) -> list[Job]:
    """Run ``sql`` (a statement returning job columns by name) and build a ``Job`` per row."""
    with connection.cursor() as cursor:
        parse_timestamps_in_c(cursor.cursor)
        cursor.execute(sql, params)
        columns = [str(column[0]) for column in cursor.description]
        rows = cursor.fetchall()
    attnames = [_ATTNAME[column] for column in columns]
    converters = [
        (i, attnames[i], _JSON[column], _JSON[column].get_col(Job._meta.db_table))
        for i, column in enumerate(columns)
        if column in _JSON
    ]
    values = []
    for row in rows:
        loaded = dict(zip(attnames, row, strict=True))
        for i, attname, field, expression in converters:
            loaded[attname] = field.from_db_value(row[i], expression, connection)
        values.append(loaded)
    return instances(alias, values)
