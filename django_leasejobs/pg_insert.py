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

import contextlib
import datetime as dt
import functools
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from django.conf import settings as django_settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.db.models.expressions import DatabaseDefault
from django.db.models.fields.json import JSONField

from . import job_rows, notify, validation
from .models import Job

CHUNK = 2000
"""Rows per bulk statement: small enough that the database has the first chunk to insert
while the next is validated, large enough that a statement carries most of its cost."""


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
        # The constant columns' values as SQL literals, quoted once by the driver (and escaped
        # for the parameter style): a statement then carries only the values its caller gave,
        # half the parameters for psycopg to adapt and quote on each enqueue.
        constant_params = [
            f.get_db_prep_save(getattr(template, f.attname), connection) for f in self.constant
        ]
        quote = connection.ops.compose_sql  # type: ignore[attr-defined]  # PostgreSQL's
        self.constant_sql = [quote("%s", [param]).replace("%", "%%") for param in constant_params]
        # Callable defaults (list, dict) must give each instance its own object.
        fresh = [f for f in self.constant if f.has_default() and callable(f.default)]
        self._fresh = [(str(f.attname), f.default) for f in fresh]
        self._static = {
            str(f.attname): getattr(template, f.attname) for f in self.constant if f not in fresh
        }
        self._returned = [str(f.attname) for f in self.returned]
        self._renamed = [(f.name, str(f.attname)) for f in self.given if f.name != f.attname]
        # NULL constants are left out of the column list (no column here has a database
        # default but the ones already left out): a shorter statement to parse and plan.
        self.inserted = [
            (f, sql)
            for f, sql in zip(self.constant, self.constant_sql, strict=True)
            if sql != "NULL"
        ]
        self.prepare = [(f.name, _preparer(f)) for f in self.given]

    def values(self, given: dict[str, Any], returned: Sequence[Any]) -> dict[str, Any]:
        """Every field's value for this row by attname: ``given`` (by field name: every field
        of the shape, nothing else), the ``returned`` columns, and the defaults."""
        values = {**self._static, **given}
        for name, attname in self._renamed:
            values[attname] = values.pop(name)
        for attname, default in self._fresh:
            values[attname] = default()
        values.update(zip(self._returned, returned, strict=True))
        return values


_AS_IS = {
    "CharField": str,
    "TextField": str,
    "SmallIntegerField": int,
    "IntegerField": int,
    "BigIntegerField": int,
    "PositiveSmallIntegerField": int,
    "PositiveIntegerField": int,
    "PositiveBigIntegerField": int,
    "FloatField": float,
}
"""Column types whose values of exactly this Python type Django sends unchanged, but for an
integer's wrapper naming its width, which a column in an INSERT's values makes needless."""


def _preparer(field: Field[Any, Any]) -> Callable[[Any, BaseDatabaseWrapper], Any]:
    """``field.get_db_prep_save``, skipped where its result is known (``_AS_IS``), and a
    JSON value sent as its text (Django wraps it for psycopg, whose Python dumper then calls
    ``json.dumps``), which ``_placeholder`` casts. Each of the calls it saves takes
    microseconds, several times more right after the enqueue's round trip than in a loop."""
    if _json_as_text(field):

        def encode(value: Any, connection: BaseDatabaseWrapper) -> Any:
            return None if value is None else validation.COMPACT_JSON.encode(value)

        return encode
    kind = _AS_IS.get(field.get_internal_type())
    if kind is not None:

        def prepare(value: Any, connection: BaseDatabaseWrapper) -> Any:
            if type(value) is kind:
                return value
            return field.get_db_prep_save(value, connection)

        return prepare
    return field.get_db_prep_save


def _json_as_text(field: Field[Any, Any]) -> bool:
    """A plain ``JSONField``: Django would encode its value with ``json.dumps`` as well."""
    return isinstance(field, JSONField) and field.encoder is None


def _placeholder(field: Field[Any, Any]) -> str:
    return "%s::jsonb" if _json_as_text(field) else "%s"


_NULL_BY_DEFAULT = frozenset(
    f.name
    for f in Job._meta.concrete_fields
    if f.null and not f.primary_key and getattr(Job(), f.attname) is None
)
"""Fields a row may leave out when it gives ``None``: the column's default is NULL too."""


@functools.lru_cache(maxsize=64)
def shape(alias: str, given: tuple[str, ...]) -> InsertShape:
    return InsertShape(alias, given)


@functools.lru_cache(maxsize=64)
def _one_sql(alias: str, given: tuple[str, ...], announce: bool) -> str:
    row = shape(alias, given)
    qn = connections[alias].ops.quote_name
    columns = [qn(str(f.column)) for f in row.given] + [qn(str(f.column)) for f, _ in row.inserted]
    values = [_placeholder(f) for f in row.given] + [sql for _, sql in row.inserted]
    names = ", ".join(qn(str(f.column)) for f in row.returned)
    insert = (
        f"INSERT INTO {qn(Job._meta.db_table)} ({', '.join(columns)}) "
        f"VALUES ({', '.join(values)}) RETURNING {names}"
    )
    if not announce:
        return insert
    # In RETURNING, not a CTE around the INSERT: the same NOTIFY for a job due now, and a
    # statement the database parses and plans in less time (0.78 against 0.86 ms a row).
    # A row without a run_at takes the statement's time: due now, no CASE to work out (0 to
    # 22 µs less a row in three runs of 40-120 interleaved blocks with libpq alone).
    if "run_at" not in given:
        return f"{insert}, pg_notify(%s, %s)"
    return f"{insert}, CASE WHEN run_at <= STATEMENT_TIMESTAMP() THEN pg_notify(%s, %s) END"


def insert_one(
    values: dict[str, Any], alias: str, connection: BaseDatabaseWrapper | None = None
) -> Job:
    """INSERT one row of ``values`` (field name to value) and return it as a ``Job``.

    A job due now is announced to idle workers (LISTEN/NOTIFY) in the same statement.
    ``connection`` is ``connections[alias]`` when the caller has it at hand.
    """
    if connection is None:
        connection = connections[alias]
    given = {k: v for k, v in values.items() if v is not None or k not in _NULL_BY_DEFAULT}
    names = tuple(given)
    row = shape(alias, names)
    params = [prepare(given[name], connection) for name, prepare in row.prepare]
    return _send(connection, alias, names, given, params, _kept_cursor(connection))


def _send(
    connection: BaseDatabaseWrapper,
    alias: str,
    names: tuple[str, ...],
    given: dict[str, Any],
    params: list[Any],
    kept: tuple[Any, Quote | None] | None,
) -> Job:
    """Run the INSERT of ``given`` (``params``: its values prepared for the columns of
    ``names``), the values bound or written in as the ``kept`` cursor takes them."""
    announce = notify.supported_on(connection)
    if announce:
        params = [*params, notify.CHANNEL, given["queue"]]
    sql = _one_sql(alias, names, announce)
    if kept is not None and kept[1] is not None:
        return _job(alias, names, given, _run(connection, kept, sql % tuple(map(kept[1], params))))
    return _job(alias, names, given, _run(connection, kept, sql, params))


def _job(alias: str, names: tuple[str, ...], given: dict[str, Any], returned: Any) -> Job:
    """The inserted row as a ``Job``: ``given`` and the columns the INSERT returned."""
    row = shape(alias, names)
    (job,) = job_rows.instances(alias, [row.values(given, returned[: len(row.returned)])])
    return job


class PlainInsert:
    """``insert_one`` for rows that differ only in their arguments: a job's enqueue without
    options, the usual call. The statement is worked out once, its other values already
    prepared and, for the simple query protocol, quoted; a call encodes and quotes two JSON
    values and joins three pieces of text. Build one per validated row and database alias."""

    _VARYING = ("args", "kwargs")

    def __init__(self, values: dict[str, Any], alias: str) -> None:
        connection = connections[alias]
        self.alias = alias
        self.given = {k: v for k, v in values.items() if v is not None or k not in _NULL_BY_DEFAULT}
        self.names = tuple(self.given)
        row = shape(alias, self.names)
        self.params = [prepare(self.given[name], connection) for name, prepare in row.prepare]
        self.varying = [
            (i, name, prepare)
            for i, (name, prepare) in enumerate(row.prepare)
            if name in self._VARYING
        ]
        self._pieces: dict[bool, list[str] | None] = {}

    def __call__(
        self, args: list[Any], kwargs: dict[str, Any], connection: BaseDatabaseWrapper
    ) -> Job:
        given = {**self.given, "args": args, "kwargs": kwargs}
        kept = _kept_cursor(connection)
        quote = None if kept is None else kept[1]
        pieces = None if quote is None else self.pieces(notify.supported_on(connection))
        if quote is None or pieces is None:
            params = list(self.params)
            for at, name, prepare in self.varying:
                params[at] = prepare(given[name], connection)
            return _send(connection, self.alias, self.names, given, params, kept)
        parts = [pieces[0]]
        for (_, name, prepare), piece in zip(self.varying, pieces[1:], strict=True):
            parts += (quote(prepare(given[name], connection)), piece)
        return _job(self.alias, self.names, given, _run(connection, kept, "".join(parts)))

    def pieces(self, announce: bool) -> list[str] | None:
        """The statement's text around its two arguments, every other value quoted; None
        when one of them has no plain literal (``_plain_literal``): only psycopg, on a
        given connection, can quote it."""
        if announce not in self._pieces:
            params = list(self.params)
            if announce:
                params += [notify.CHANNEL, self.given["queue"]]
            literals = [_plain_literal(value) for value in params]
            for at, _, _ in self.varying:
                literals[at] = _SPLIT
            if None in literals:
                self._pieces[announce] = None
            else:
                text = _one_sql(self.alias, self.names, announce) % tuple(literals)
                self._pieces[announce] = text.split(_SPLIT)
        return self._pieces[announce]


_SPLIT = "\x00"
"""Marks where an argument goes in a statement's text: no SQL text or quoted value has it."""


def _run(
    connection: BaseDatabaseWrapper,
    kept: tuple[Any, Quote | None] | None,
    sql: str,
    params: list[Any] | None = None,
) -> Any:
    """Execute the INSERT on the kept cursor (or Django's own) and return its one row."""
    if kept is None:
        with connection.cursor() as cursor:
            job_rows.parse_timestamps_in_c(cursor.cursor)
            return _execute(cursor, sql, params)
    # An enqueue from inside this one (an execute wrapper's) takes Django's own cursor.
    connection.__dict__[_BUSY] = True
    try:
        return _execute(kept[0], sql, params)
    finally:
        connection.__dict__[_BUSY] = False


def _execute(cursor: Any, sql: str, params: list[Any] | None) -> Any:
    cursor.execute(sql, params)
    return cursor.fetchone()


_BUSY = "_leasejobs_insert_cursor_busy"
_KEPT = "_leasejobs_insert_cursor"
"""The Django connection's attribute holding ``(driver connection, session time zone,
whether psycopg may prepare, client encoding, the Django cursor kept for them, its quoting
function)``."""

Quote = Callable[[Any], str]


def _kept_cursor(connection: BaseDatabaseWrapper) -> tuple[Any, Quote | None] | None:
    """A Django cursor over the one driver cursor ``insert_one`` keeps per driver connection,
    and the function quoting values into its SQL when it takes them as literals; or None where
    Django's own cursor serves: psycopg2, ``USE_TZ = False`` (Django's time-zone loader then
    applies), query logging (``DEBUG``: Django's cursor logs what it always did) and an
    enqueue made while the kept cursor runs one (from an execute wrapper).

    Which cursor follows the project's prepared-statement setting. Django's default
    (``prepare_threshold=None``, as transaction-pooling PgBouncers need) prepares nothing: the
    statement then goes with its values written in, over the simple query protocol: 0.72 ms a
    row against 0.79 as an unnamed statement with parameters, 0.77 through psycopg's own
    client-side binding (which parses the statement for placeholders on every call), measured
    with psycopg alone; the values are quoted here, most as plain text. With
    ``prepare_threshold`` set, the cursor binds on the server and psycopg prepares the
    statement, which is faster still (0.63 ms).

    Kept open, the cursor keeps psycopg's C timestamp loader registered once instead of on
    every enqueue. Execute wrappers and error translation are Django's own
    (``CursorWrapper``). It is kept on the Django connection (one per thread), never in a
    global table: it refers to its driver connection, which would then never be freed.
    """
    classes = _cursor_classes()
    if (
        classes is None
        or not django_settings.USE_TZ
        or connection.queries_logged
        or connection.__dict__.get(_BUSY)
    ):
        return None
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    driver = connection.connection
    # The C loader reads the session's time zone when the cursor first loads a timestamp.
    zone = connection.timezone_name
    prepares = driver.prepare_threshold is not None
    # psycopg's adapters take the client encoding once (it makes new ones per query for
    # that reason): a session that changes it needs a new cursor and quoting function.
    encoding = driver.pgconn.parameter_status(b"client_encoding")
    kept = connection.__dict__.get(_KEPT)
    if (
        kept is None
        or kept[0] is not driver
        or kept[1] != zone
        or kept[2] is not prepares
        or kept[3] != encoding
        or kept[4].cursor.closed
    ):
        with connection.wrap_database_errors:
            cursor = classes[prepares](driver)
        job_rows.parse_timestamps_in_c(cursor)
        quote = None if prepares else _quoter(cursor, connection)
        kept = (driver, zone, prepares, encoding, connection.make_cursor(cursor), quote)
        connection.__dict__[_KEPT] = kept
    connection.validate_thread_sharing()
    return kept[4], kept[5]


@functools.cache
def _cursor_classes() -> tuple[type, type] | None:
    """Django's psycopg 3 cursor classes: the one writing values into the SQL (its default)
    and the one binding them on the server; None with psycopg2."""
    try:
        from django.db.backends.postgresql.base import Cursor, ServerBindingCursor
    except ImportError:
        return None
    return Cursor, ServerBindingCursor


def _plain_literal(value: Any) -> str | None:
    """``value`` as an SQL literal, for text without a backslash or NUL, integers and finite
    floats that are not negative (a job's lease): the same literal on every connection,
    whatever ``standard_conforming_strings`` says. Text is quoted with its quotes doubled
    (PostgreSQL reads a statement in the client encoding, so no multibyte character can hide
    a quote). None for anything else."""
    kind = type(value)
    if kind is str and "\\" not in value and "\x00" not in value:
        return "'" + value.replace("'", "''") + "'"
    if kind is int:
        return str(value)
    # The shortest text that reads back as the same double; not -0.0, whose sign a minus
    # on a numeric zero would lose (nor NaN or infinities, which have no numeric literal).
    if kind is float and math.isfinite(value) and math.copysign(1.0, value) > 0:
        return repr(value)
    return None


def _quoter(cursor: Any, connection: BaseDatabaseWrapper) -> Quote:
    """A value as an SQL literal, as psycopg's client-side binding would write it: the plain
    literal where there is one (``_plain_literal``), psycopg's own otherwise (``E''``
    strings, typed timestamps, its errors)."""
    from psycopg.adapt import Transformer

    transformer = Transformer(cursor)

    def quote(value: Any) -> str:
        literal = _plain_literal(value)
        if literal is not None:
            return literal
        with connection.wrap_database_errors:
            return transformer.as_literal(value).decode(transformer.encoding)

    return quote


@functools.lru_cache(maxsize=64)
def _many_sql(alias: str, varying: tuple[str, ...], fixed: tuple[str, ...]) -> str:
    row = shape(alias, (*varying, *fixed))
    connection = connections[alias]
    qn = connection.ops.quote_name
    selects = (
        [
            f"e.r->{i}" if isinstance(f, JSONField) else f"(e.r->>{i})::{f.db_type(connection)}"
            for i, f in enumerate(row.given[: len(varying)])
        ]
        + ["%s"] * len(fixed)
        + [sql for _, sql in row.inserted]
    )
    return (
        f"INSERT INTO {qn(Job._meta.db_table)} "
        f"({', '.join(qn(str(f.column)) for f in [*row.given, *(f for f, _ in row.inserted)])}) "
        f"SELECT {', '.join(selects)} "
        "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(r, n) ORDER BY e.n "
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
    ready and the database inserts it while the next chunk is taken from ``rows`` (a lazy
    iterable lets the caller validate it meanwhile) and encoded; the results are read at the
    end. Without it the database and Python take turns, each idle half of the time.
    """
    connection = connections[alias]
    sent: list[tuple[list[dict[str, Any]], InsertShape, Any]] = []
    with _pipeline(connection):
        for chunk in _chunks(rows):
            row, sql, params = _many_statement(chunk, connection, alias)
            cursor = connection.cursor()
            job_rows.parse_timestamps_in_c(cursor.cursor)
            cursor.execute(sql, params)
            sent.append((chunk, row, cursor))
        jobs: list[Job] = []
        for chunk, row, cursor in sent:
            with cursor:
                returned_rows = sorted(cursor.fetchall())
            jobs += job_rows.instances(alias, map(row.values, chunk, returned_rows))
    return jobs


def _chunks(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, CHUNK)):
        yield chunk


def _many_statement(
    chunk: list[dict[str, Any]], connection: BaseDatabaseWrapper, alias: str
) -> tuple[InsertShape, str, list[Any]]:
    first = chunk[0]
    varying = tuple(name for name in first if _varies(name, chunk))
    fixed = tuple(name for name in first if name not in varying)
    row = shape(alias, (*varying, *fixed))
    fixed_params = [
        f.get_db_prep_save(first[f.name], connection) for f in row.given[len(varying) :]
    ]
    payload = validation.COMPACT_JSON.encode(
        [[_jsonable(values[name]) for name in varying] for values in chunk]
    )
    return row, _many_sql(alias, varying, fixed), [*fixed_params, payload]


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
