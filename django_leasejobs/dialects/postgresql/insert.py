"""PostgreSQL INSERTs of new job rows: one statement per row shape, every value a parameter.

The columns split once per *row shape* (which fields the caller gave): the given ones are
prepared per row, every other column is a model default prepared once, and the ones with a
database default (``created_at``, ``run_at`` when not given) come back through ``RETURNING``.
Every value reaches the database as a driver parameter, however the connection binds them:
each column's parameter is named after it (``%(queue)s``). The statements are written by two
builders, ``insert_one_statement`` and ``insert_many_statement``: what varies in their text
is only what the row shape decides (its column lists, and the casts of the varying fields).

One row: one ``INSERT ... RETURNING`` that also carries the ``pg_notify`` waking idle workers (in
the INSERT's own statement, so it is delivered on commit and never for a rolled-back job).
Many rows: a few thousand per statement, their varying fields as one JSON parameter.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import NOT_PROVIDED, Field
from django.db.models.expressions import DatabaseDefault, Value
from django.db.models.fields.json import JSONField

from ...core import json_values
from ...models import Job
from .. import fair_stamps
from . import client_encoding, fair_lines, job_rows, notify
from .timestamps import timestamps_in_c

CHUNK = 2000
"""Rows per bulk statement: small enough that the database has the first chunk to insert
while the next is validated, large enough that a statement carries most of its cost."""

_FIELDS = [f for f in Job._meta.concrete_fields if not f.primary_key]


class InsertShape:
    """The columns of an INSERT whose rows give values for ``given`` (field names); with
    ``placed``, the database works out the row's place in line (``run_at`` and ``fair_at``
    come back)."""

    def __init__(self, alias: str, given: tuple[str, ...], placed: bool = False) -> None:
        connection = connections[alias]
        template = Job()
        by_name = {**{f.name: f for f in _FIELDS}, **{str(f.attname): f for f in _FIELDS}}
        self.given: list[Field[Any, Any]] = [by_name[name] for name in given]
        # Model defaults the caller left out, as parameters prepared once. NULL ones are left
        # out of the column list, and so are the ones the column's own default stores as
        # well: a shorter statement, with fewer parameters to bind, parse and plan.
        self.constant = [
            f
            for f in _FIELDS
            if f not in self.given
            and not isinstance(getattr(template, f.attname), DatabaseDefault)
            and getattr(template, f.attname) is not None
            and not _database_stores(f, getattr(template, f.attname))
        ]
        self.constant_params = {
            str(f.attname): f.get_db_prep_save(getattr(template, f.attname), connection)
            for f in self.constant
        }
        self.returned = [
            Job._meta.pk,
            *(
                f
                for f in _FIELDS
                if isinstance(getattr(template, f.attname), DatabaseDefault) and f not in self.given
            ),
        ]
        if placed:
            self.returned += [Job._meta.get_field("fair_at")]
            if "run_at" in given:
                self.returned += [Job._meta.get_field("run_at")]
        self._keys = [(key, str(f.attname), f) for key, f in zip(given, self.given, strict=True)]
        # The loaded job's attributes: every field's model default, then per row the given
        # values (by attname: a key given by field name is renamed), the returned columns (or
        # later, by ``fill``) and a fresh default from each callable (its own list or dict).
        self._template = {
            str(f.attname): getattr(template, f.attname) for f in Job._meta.concrete_fields
        }
        self._renamed = [
            (key, str(f.attname))
            for key, f in zip(given, self.given, strict=True)
            if key != f.attname
        ]
        given_attnames = {f.attname for f in self.given}
        self._returned_attnames = [(str(f.attname), i) for i, f in enumerate(self.returned)]
        self._fresh = [
            (str(f.attname), f.default)
            for f in Job._meta.concrete_fields
            if f.attname not in given_attnames and f.has_default() and callable(f.default)
        ]

    def params(self, given: dict[str, Any], connection: BaseDatabaseWrapper) -> dict[str, Any]:
        """The statement's parameters for one row of ``given`` values, by column (attname)."""
        params = {
            attname: f.get_db_prep_save(given[key], connection) for key, attname, f in self._keys
        }
        params.update(self.constant_params)
        return params

    def instance(
        self,
        build: Callable[[dict[str, Any]], Job],
        given: dict[str, Any],
        returned: Sequence[Any] | None = None,
    ) -> Job:
        """The inserted row as the ``Job`` a query would load (made by ``build``, a
        ``job_rows.builder``): ``given`` (every key of the shape, no other), the ``returned``
        columns (or later, by ``fill``), and the defaults."""
        attrs = self._template.copy()
        attrs.update(given)
        for key, attname in self._renamed:
            attrs[attname] = attrs.pop(key)
        if returned is not None:
            for attname, column in self._returned_attnames:
                attrs[attname] = returned[column]
        for attname, default in self._fresh:
            attrs[attname] = default()
        return build(attrs)

    def fill(self, job: Job, returned: Sequence[Any]) -> None:
        """Set the ``returned`` columns on a job built before the database sent them."""
        for attname, column in self._returned_attnames:
            setattr(job, attname, returned[column])


def _database_stores(field: Field[Any, Any], value: Any) -> bool:
    """Whether the column's own default is ``value``: a constant ``db_default`` equal to the
    model's default (``snoozes``, ``version``), which a row leaving the column out gets."""
    db_default = field.db_default
    if isinstance(db_default, Value):
        db_default = db_default.value
    elif db_default is NOT_PROVIDED or hasattr(db_default, "resolve_expression"):
        return False  # none, or an expression (``Now()``): not a value known here
    return type(db_default) is type(value) and db_default == value


_NULL_BY_DEFAULT = frozenset(
    f.name for f in _FIELDS if f.null and getattr(Job(), f.attname) is None
)
"""Fields a row may leave out when it gives ``None``: the column's default is NULL too."""


@functools.lru_cache(maxsize=64)
def shape(alias: str, given: tuple[str, ...], placed: bool = False) -> InsertShape:
    return InsertShape(alias, given, placed)


def placeholder(field: Field[Any, Any]) -> str:
    """The named parameter of a column: ``%(queue)s``, ``%(schedule_id)s``."""
    return f"%({field.attname})s"


NOTIFY_CHANNEL = "notify_channel"
"""The parameter of the channel an announced INSERT notifies (no column has this name)."""


@functools.lru_cache(maxsize=64)
def insert_one_statement(
    alias: str, given: tuple[str, ...], announce: bool, placed: bool = False
) -> str:
    """``INSERT INTO job (...) VALUES (...) RETURNING ...`` for one row giving ``given``.

    Its parameters are named after the columns (``%(queue)s``), the shape's given ones then its
    constant ones; with ``announce``, ``%(notify_channel)s`` too. With ``placed``, a fair row's
    place in line is worked out by the same statement (``fair_lines.placed``).
    """
    row = shape(alias, given, placed)
    qn = connections[alias].ops.quote_name
    fields = [*row.given, *row.constant]
    columns = [qn(str(f.column)) for f in fields]
    values = [placeholder(f) for f in fields]
    place = fair_lines.placed(given, columns, values) if placed else ""
    names = ", ".join(qn(str(f.column)) for f in row.returned)
    insert = (
        f"{place}INSERT INTO {qn(Job._meta.db_table)} ({', '.join(columns)}) "
        f"VALUES ({', '.join(values)}) RETURNING {names}"
    )
    if not announce:
        return insert
    # In RETURNING, not a CTE around the INSERT: the same NOTIFY for a job due now, and a
    # shorter statement for the database to parse and plan. Its payload is the new row's
    # queue column, not the value sent again. A row without a run_at takes the statement's
    # time: due now, no CASE to work out.
    queue = qn(str(Job._meta.get_field("queue").column))
    notify_call = f"pg_notify(%({NOTIFY_CHANNEL})s, {queue})"
    if "run_at" not in given:
        return f"{insert}, {notify_call}"
    return f"{insert}, CASE WHEN run_at <= STATEMENT_TIMESTAMP() THEN {notify_call} END"


def insert_one(values: dict[str, Any], alias: str) -> Job:
    """INSERT one row of ``values`` (field name to value) and return it as a ``Job``.

    A job due now is announced to idle workers (LISTEN/NOTIFY) in the same statement.
    """
    connection = connections[alias]
    given = {k: v for k, v in values.items() if v is not None or k not in _NULL_BY_DEFAULT}
    connection.ensure_connection()
    client_encoding.check_sendable(given.items(), connection)
    names = tuple(given)
    placed = fair_stamps.needs_place(given)
    row = shape(alias, names, placed)
    params = row.params(given, connection)
    announce = notify.supported_on(connection)
    if announce:
        params[NOTIFY_CHANNEL] = notify.CHANNEL
    with connection.cursor() as cursor:
        timestamps_in_c(cursor.cursor)
        cursor.execute(insert_one_statement(alias, names, announce, placed), params)
        returned = cursor.fetchone()
    return row.instance(job_rows.builder(alias), given, returned[: len(row.returned)])


@functools.lru_cache(maxsize=64)
def insert_many_statement(alias: str, varying: tuple[str, ...], fixed: tuple[str, ...]) -> str:
    """``INSERT INTO job (...) SELECT ... FROM jsonb_array_elements(%(rows)s::jsonb) ...``.

    ``%(rows)s`` is a JSON array with one array per row: the row's ``varying`` fields, in that
    order, read by position (``e.r->0``) and cast to their column's type. The ``fixed`` fields
    (the same in every row) and the shape's constant ones are parameters named after their
    column (``%(queue)s``), as in ``insert_one_statement``.
    """
    row = shape(alias, (*varying, *fixed))
    connection = connections[alias]
    qn = connection.ops.quote_name
    selects = [
        f"e.r->{i}" if isinstance(f, JSONField) else f"(e.r->>{i})::{f.db_type(connection)}"
        for i, f in enumerate(row.given[: len(varying)])
    ] + [placeholder(f) for f in [*row.given[len(varying) :], *row.constant]]
    return (
        f"INSERT INTO {qn(Job._meta.db_table)} "
        f"({', '.join(qn(str(f.column)) for f in [*row.given, *row.constant])}) "
        f"SELECT {', '.join(selects)} "
        "FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS e(r, n) ORDER BY e.n "
        f"RETURNING {', '.join(qn(str(f.column)) for f in row.returned)}"
    )


def insert_many(rows: Iterable[dict[str, Any]], alias: str) -> list[Job]:
    """Insert rows that all give the same fields; return them as ``Job`` instances, in order.

    Rows are taken ``CHUNK`` at a time, one statement each. In a chunk, fields with the same
    value in every row are parameters of the statement; the ones that vary travel as one JSON
    array (one parameter, encoded in C), so a chunk is one short statement instead of
    thousands of placeholders, and the database casts only what varies. Ids are assigned in
    row order within a statement, so the RETURNING rows sorted by id line up with the input.

    On psycopg 3 the statements go through a pipeline: each is sent as soon as its chunk is
    ready and the database inserts it while the chunk's jobs are built and the next chunk is
    taken from ``rows`` (a lazy iterable lets the caller validate it meanwhile) and encoded;
    the results (ids, database defaults) are read at the end and set on the jobs. Without it
    the database and Python take turns, each idle half of the time. A chunk's rows are let go
    once its jobs are built, so a large bulk keeps fewer objects alive for the collector.
    """
    connection = connections[alias]
    sent: list[tuple[list[Job], InsertShape, Any]] = []
    build = job_rows.builder(alias)
    with _pipeline(connection):
        for chunk in _chunks(rows):
            row, sql, params = _many_statement(chunk, connection, alias)
            cursor = connection.cursor()
            timestamps_in_c(cursor.cursor)
            cursor.execute(sql, params)
            sent.append(([row.instance(build, values) for values in chunk], row, cursor))
        for jobs, row, cursor in sent:
            with cursor:
                returned_rows = sorted(cursor.fetchall())
            for job, returned in zip(jobs, returned_rows, strict=True):
                row.fill(job, returned)
    return [job for jobs, _, _ in sent for job in jobs]


def _chunks(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, CHUNK)):
        yield chunk


def _many_statement(
    chunk: list[dict[str, Any]], connection: BaseDatabaseWrapper, alias: str
) -> tuple[InsertShape, str, dict[str, Any]]:
    client_encoding.check_rows(chunk, connection)
    first = chunk[0]
    varying = tuple(name for name in first if _varies(name, chunk))
    fixed = tuple(name for name in first if name not in varying)
    row = shape(alias, (*varying, *fixed))
    params = {
        str(f.attname): f.get_db_prep_save(first[name], connection)
        for name, f in zip(fixed, row.given[len(varying) :], strict=True)
    }
    params.update(row.constant_params)
    params["rows"] = json_values.COMPACT_JSON.encode(
        [[_jsonable(values[name]) for name in varying] for values in chunk]
    )
    return row, insert_many_statement(alias, varying, fixed), params


def _pipeline(connection: BaseDatabaseWrapper) -> AbstractContextManager[Any]:
    """psycopg 3's pipeline mode on this connection, where the driver and libpq have it."""
    connection.ensure_connection()
    driver = getattr(connection.connection, "pipeline", None)
    if driver is None:  # psycopg2
        return contextlib.nullcontext()
    from psycopg import Pipeline

    if not Pipeline.is_supported():
        return contextlib.nullcontext()
    return _wrapped(connection, driver)


@contextlib.contextmanager
def _wrapped(connection: BaseDatabaseWrapper, pipeline: Callable[[], Any]) -> Iterator[None]:
    # Errors surface when the pipeline is left, outside any Django cursor: wrap them as one.
    with connection.wrap_database_errors, pipeline():
        yield


def _varies(name: str, rows: list[dict[str, Any]]) -> bool:
    """Whether ``name`` would be stored differently in some row than in the first."""
    column = list(map(operator.itemgetter(name), rows))
    first = column[0]
    # Most columns hold the very same object in every row (the defaults a bulk enqueue
    # resolved once): an identity test in C settles them without a call per row.
    if all(map(operator.is_, column, itertools.repeat(first))):
        return False
    # Values equal in Python are the same JSON unless numbers are involved (1 == 1.0 == True):
    # without numbers, counting equal values (in C) settles it.
    if column.count(first) != len(column):
        return True
    if not _has_numbers(first):
        return False
    return not all(_same_json(value, first) for value in column)


def _has_numbers(value: Any) -> bool:
    if isinstance(value, int | float):  # bool too
        return True
    if isinstance(value, list | tuple):
        return any(map(_has_numbers, value))
    if isinstance(value, dict):
        return any(map(_has_numbers, value.values()))
    return False


def _same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value (a validated one: no NaN, str keys).

    ``1 == 1.0 == True`` in Python, not in JSON (``[1]``, ``[1.0]``, ``[true]`` are three jsonb
    values), so values match only with the same type, all the way down. Encoding both would
    say the same, at several times the cost on a bulk enqueue's every row.
    """
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    # Subclasses too (OrderedDict, namedtuple): compared by their own type, their items walked.
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(_same_json, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(value, b[key]) for key, value in a.items())
    if isinstance(a, float):  # 0.0 == -0.0
        return bool(a == b) and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value
