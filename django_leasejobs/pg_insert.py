"""PostgreSQL INSERTs of new job rows, with the statement and the constant parameters built once.

An enqueue is on the producer's path, often inside a web request, so its Python cost matters:
building a ``Job`` through keyword arguments, preparing two dozen field values and quoting the
columns cost more CPU than the database's own work for the row (profiled: 0.5 ms of CPU per
enqueue against 0.25 ms for the same statement sent through a Django cursor). Here the columns
split once per *row shape* (which fields the caller gave): the given ones are prepared per row,
every other column is a model default prepared once, and the ones with a database default
(``created_at``, ``run_at`` when not given) come back through ``RETURNING``. The returned
instances are the ones a queryset would load (``job_rows.instances``).

One row: one ``INSERT ... RETURNING`` that also carries the ``pg_notify`` waking idle workers (in
the INSERT's own statement, so it is delivered on commit and never for a rolled-back job).
Many rows: a few thousand per statement, their varying fields as one JSON parameter.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import math
import operator
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.db.models import Field
from django.db.models.expressions import DatabaseDefault
from django.db.models.fields.json import JSONField

from . import job_rows, notify, validation
from .models import Job

CHUNK = 5000
"""Rows per bulk statement."""


class InsertShape:
    """The columns of an INSERT whose rows give values for ``given`` (field names)."""

    def __init__(self, alias: str, given: tuple[str, ...]) -> None:
        connection = connections[alias]
        template = Job()
        fields = [f for f in Job._meta.concrete_fields if not f.primary_key]
        self.given: list[Field[Any, Any]] = [f for name in given for f in fields if f.name == name]
        self.constant = [
            f
            for f in fields
            if f.name not in given and not isinstance(getattr(template, f.attname), DatabaseDefault)
        ]
        self.returned = [Job._meta.pk, *(f for f in fields if f not in self.given + self.constant)]
        self.constant_params = [
            f.get_db_prep_save(getattr(template, f.attname), connection) for f in self.constant
        ]
        # Callable defaults (list, dict) must give each instance its own object.
        fresh = [f for f in self.constant if f.has_default() and callable(f.default)]
        static = [f for f in self.constant if f not in fresh]
        self._fresh = [f.default for f in fresh]
        self._static = [getattr(template, f.attname) for f in static]
        self.attnames = [str(f.attname) for f in [*self.given, *self.returned, *fresh, *static]]
        """The fields of ``values()``, in its order."""

    def values(self, given: Sequence[Any], returned: Sequence[Any]) -> list[Any]:
        """Every field's value for this row, in the order of ``attnames``."""
        return [*given, *returned, *[default() for default in self._fresh], *self._static]


@functools.lru_cache(maxsize=64)
def shape(alias: str, given: tuple[str, ...]) -> InsertShape:
    return InsertShape(alias, given)


@functools.lru_cache(maxsize=64)
def _one_sql(alias: str, given: tuple[str, ...], announce: bool) -> str:
    row = shape(alias, given)
    qn = connections[alias].ops.quote_name
    columns = [qn(str(f.column)) for f in [*row.given, *row.constant]]
    names = ", ".join(qn(str(f.column)) for f in row.returned)
    insert = (
        f"INSERT INTO {qn(Job._meta.db_table)} ({', '.join(columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))}) RETURNING {names}"
    )
    if not announce:
        return insert
    return (
        f"WITH inserted AS ({insert}, run_at <= STATEMENT_TIMESTAMP() AS due_now) "
        f"SELECT {names}, (SELECT pg_notify(%s, %s) WHERE due_now) IS NULL FROM inserted"
    )


def insert_one(values: dict[str, Any], alias: str) -> Job:
    """INSERT one row of ``values`` (field name to value) and return it as a ``Job``.

    A job due now is announced to idle workers (LISTEN/NOTIFY) in the same statement.
    """
    connection = connections[alias]
    given = tuple(values)
    row = shape(alias, given)
    announce = notify.supported(alias)
    params = [f.get_db_prep_save(values[f.name], connection) for f in row.given]
    params += row.constant_params
    if announce:
        params += [notify.CHANNEL, values["queue"]]
    with connection.cursor() as cursor:
        job_rows.parse_timestamps_in_c(cursor.cursor)
        cursor.execute(_one_sql(alias, given, announce), params)
        returned = cursor.fetchone()
    given_values = [values[f.name] for f in row.given]
    (job,) = job_rows.instances(
        alias, row.attnames, [row.values(given_values, returned[: len(row.returned)])]
    )
    return job


@functools.lru_cache(maxsize=64)
def _many_sql(alias: str, varying: tuple[str, ...], fixed: tuple[str, ...]) -> str:
    row = shape(alias, (*varying, *fixed))
    connection = connections[alias]
    qn = connection.ops.quote_name
    selects = [
        f"e.r->{i}" if isinstance(f, JSONField) else f"(e.r->>{i})::{f.db_type(connection)}"
        for i, f in enumerate(row.given[: len(varying)])
    ] + ["%s"] * (len(fixed) + len(row.constant))
    return (
        f"INSERT INTO {qn(Job._meta.db_table)} "
        f"({', '.join(qn(str(f.column)) for f in [*row.given, *row.constant])}) "
        f"SELECT {', '.join(selects)} "
        "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(r, n) ORDER BY e.n "
        f"RETURNING {', '.join(qn(str(f.column)) for f in row.returned)}"
    )


def insert_many(rows: list[dict[str, Any]], alias: str) -> list[Job]:
    """Insert rows that all give the same fields; return them as ``Job`` instances, in order.

    Fields with the same value in every row are parameters of the statement; the ones that vary
    travel as one JSON array per chunk (one parameter, encoded in C), so a chunk is one short
    statement instead of thousands of placeholders, and the database casts only what varies.
    Ids are assigned in row order within a statement, so the RETURNING rows sorted by id line
    up with the input.
    """
    if not rows:
        return []
    connection = connections[alias]
    first = rows[0]
    varying = tuple(name for name in first if _varies(name, rows))
    fixed = tuple(name for name in first if name not in varying)
    row = shape(alias, (*varying, *fixed))
    sql = _many_sql(alias, varying, fixed)
    fixed_params = [
        f.get_db_prep_save(first[f.name], connection) for f in row.given[len(varying) :]
    ]
    field_values: list[list[Any]] = []
    with connection.cursor() as cursor:
        job_rows.parse_timestamps_in_c(cursor.cursor)
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            payload = validation.COMPACT_JSON.encode(
                [[_jsonable(values[name]) for name in varying] for values in chunk]
            )
            cursor.execute(sql, [*fixed_params, *row.constant_params, payload])
            for values, returned in zip(chunk, sorted(cursor.fetchall()), strict=True):
                given = [values[f.name] for f in row.given]
                field_values.append(row.values(given, returned))
    return job_rows.instances(alias, row.attnames, field_values)


def _varies(name: str, rows: list[dict[str, Any]]) -> bool:
    """Whether ``name`` would be stored differently in some row than in the first."""
    column = list(map(operator.itemgetter(name), rows))
    first = column[0]
    # Most columns hold the very same object in every row (the defaults a bulk enqueue
    # resolved once): an identity test in C settles them without a call per row.
    if all(map(operator.is_, column, itertools.repeat(first))):
        return False
    return not all(_same_json(value, first) for value in column)


def _same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value (a validated one: no NaN, str keys).

    ``1 == 1.0 == True`` in Python, not in JSON (``[1]``, ``[1.0]``, ``[true]`` are three jsonb
    values), so values match only with the same type, all the way down. Encoding both would
    say the same, at several times the cost on a bulk enqueue's every row.
    """
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(map(_same_json, a, b))
    if kind is dict:
        return a.keys() == b.keys() and all(_same_json(value, b[key]) for key, value in a.items())
    if kind is float:  # 0.0 == -0.0
        return bool(a == b) and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value
