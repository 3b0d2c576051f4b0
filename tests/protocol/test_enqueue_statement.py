"""The one-row enqueue statement: how it reaches the database, on every kind of connection.

It is a Django query (debug log, execute wrappers, async guard) whose values travel as the
driver's parameters, however the connection binds them; on PostgreSQL it follows the
project's prepared-statement setting and survives a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import json
import weakref
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import DatabaseError, close_old_connections, connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testapp import jobs

from django_leasejobs import job
from django_leasejobs.core import registry
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, Status

from ..conftest import examples, race

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL's enqueue statement: written-in values or prepared",
)

INSERT = 'INSERT INTO "django_leasejobs_job"'


def _prepared_inserts() -> list[str]:
    """This session's prepared statements that insert jobs (PostgreSQL keeps them per session)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s",
            [INSERT + "%"],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def prepare_threshold() -> Iterator[Any]:
    """Set psycopg's ``prepare_threshold`` on the open connection, as Django does from the
    database's ``OPTIONS`` when it connects; restored afterwards. Other databases: no-op."""
    if connection.vendor != "postgresql":
        yield lambda value: None
        return
    connection.ensure_connection()
    driver = connection.connection
    before = driver.prepare_threshold

    def set_threshold(value: int | None) -> None:
        driver.prepare_threshold = value

    yield set_threshold
    driver.prepare_threshold = before


def _binds_on_the_server() -> bool:
    return bool(connection.settings_dict.get("OPTIONS", {}).get("server_side_binding"))


@postgresql_only
@pytest.mark.django_db
def test_the_statement_is_prepared_only_where_the_project_binds_on_the_server(
    prepare_threshold: Any,
) -> None:
    """Django's ``server_side_binding`` with ``prepare_threshold`` prepares the INSERT; its
    default client-side binding never does (transaction-pooling PgBouncers need that)."""
    prepare_threshold(2)
    created = [jobs.noop.enqueue() for _ in range(4)]
    prepared = _prepared_inserts()
    if _binds_on_the_server():
        (statement,) = prepared
        assert "pg_notify" in statement
    else:
        assert prepared == []
    stored = Job.objects.filter(pk__in=[job.pk for job in created])
    assert sorted(stored.values_list("pk", flat=True)) == sorted(job.pk for job in created)
    assert {job.status for job in stored} == {Status.PENDING}


@postgresql_only
@pytest.mark.django_db
def test_django_default_prepares_nothing(prepare_threshold: Any) -> None:
    """``prepare_threshold=None`` (Django's default, for transaction-pooling PgBouncers)."""
    prepare_threshold(None)
    for _ in range(8):
        jobs.noop.enqueue()
    assert _prepared_inserts() == []
    assert Job.objects.count() == 8


@pytest.mark.django_db
def test_enqueue_is_a_query_django_logs() -> None:
    with CaptureQueriesContext(connection) as queries:
        job = jobs.noop.enqueue()
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1
    assert "django_leasejobs_job" in inserts[0]
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == 1  # the INSERT carries its NOTIFY
        # Columns left NULL are not named: a shorter statement to parse.
        assert '"lease_expires_at"' not in inserts[0]
    assert Job.objects.get(pk=job.pk).name == "testapp.jobs.noop"


@postgresql_only
@pytest.mark.django_db
def test_columns_whose_database_default_is_the_models_are_left_to_the_database() -> None:
    """``snoozes``, ``deferrals`` and ``version`` default to the same value in the schema:
    the INSERTs do not name them, and the jobs returned hold what a read gives."""
    with CaptureQueriesContext(connection) as queries:
        single = jobs.noop.enqueue()
        bulk = jobs.noop.enqueue_many([((), {})] * 3)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 2
    for insert in inserts:
        for column in ('"snoozes"', '"deferrals"', '"version"'):
            assert column not in insert
        assert '"attempt"' in insert  # no default in the schema: a parameter
    for enqueued in [single, *bulk]:
        stored = Job.objects.get(pk=enqueued.pk)
        assert (enqueued.snoozes, enqueued.deferrals, enqueued.version) == (0, 0, 1)
        assert (stored.snoozes, stored.deferrals, stored.version) == (0, 0, 1)


@pytest.mark.django_db
def test_the_query_log_shows_the_values() -> None:
    with CaptureQueriesContext(connection) as queries:
        jobs.noop.enqueue(queue="shown")
    (insert,) = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert "'testapp.jobs.noop'" in insert
    assert "'shown'" in insert


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="sqlite3.Connection cannot be weakly referenced"
)
@pytest.mark.django_db(transaction=True)
def test_a_closed_connection_and_its_cursor_are_freed() -> None:
    """Nothing keeps the driver connection of a closed Django connection alive."""
    jobs.noop.enqueue()
    driver = weakref.ref(connection.connection)
    connection.close()
    jobs.noop.enqueue()
    gc.collect()
    assert driver() is None
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_time_zone_settings_apply_to_the_returned_job() -> None:
    """What enqueue() returns holds the datetimes a read would, as the settings say now."""
    aware = jobs.noop.enqueue()
    assert Job.objects.get(pk=aware.pk).created_at == aware.created_at
    assert aware.created_at.utcoffset() is not None
    with override_settings(USE_TZ=False):
        naive = jobs.noop.enqueue()
        read = Job.objects.get(pk=naive.pk)
        assert naive.created_at.tzinfo is None
        assert (naive.created_at, naive.run_at) == (read.created_at, read.run_at)
    again = jobs.noop.enqueue()
    assert again.created_at.utcoffset() is not None
    assert Job.objects.get(pk=again.pk).created_at == again.created_at


@pytest.mark.django_db
def test_bulk_and_delayed_enqueues_without_time_zones() -> None:
    """``USE_TZ = False``: the database's clock comes back naive (UTC), as every time Django
    writes then; it was aware, which SQLite and MySQL refused to store."""
    with override_settings(USE_TZ=False):
        [bulk] = jobs.noop.enqueue_many([((), {})])
        delayed = jobs.noop.using(delay=5).enqueue()
        rows = {job.pk: job for job in Job.objects.all()}
    assert rows[bulk.pk].run_at.tzinfo is None
    assert rows[delayed.pk].run_at.tzinfo is None
    assert rows[delayed.pk].run_at - rows[delayed.pk].created_at >= dt.timedelta(seconds=4)


@pytest.mark.django_db
def test_execute_wrappers_see_the_enqueue() -> None:
    seen: list[str] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        jobs.noop.enqueue()
    assert any(sql.startswith("INSERT") and "django_leasejobs_job" in sql for sql in seen)


@pytest.mark.django_db(transaction=True)
def test_enqueue_works_again_on_a_new_connection() -> None:
    first = jobs.takes_anything.enqueue()
    connection.close()
    second = jobs.noop.enqueue(queue="other")
    assert second.pk != first.pk
    assert dict(Job.objects.values_list("pk", "queue")) == {first.pk: "default", second.pk: "other"}


@pytest.mark.django_db(transaction=True)
def test_threads_enqueue_at_once_each_on_its_own_connection() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers; the per-connection cursor is PostgreSQL's")

    def produce() -> list[int]:
        return [jobs.noop.enqueue().pk for _ in range(50)]

    created = [pk for pks in race(*[produce] * 4) for pk in pks]
    assert len(set(created)) == 200
    assert Job.objects.count() == 200


@pytest.mark.django_db
def test_enqueue_from_async_code_is_refused() -> None:
    async def enqueue_in_event_loop() -> None:
        jobs.noop.enqueue()

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(enqueue_in_event_loop())
    assert Job.objects.count() == 0


# What JSON and every database can hold: no NUL, no lone surrogate, no float that jsonb gives
# back changed (-0.0, 1e16 and more: refused at enqueue).
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=5)
ARGUMENTS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(-1e16, 1e16, exclude_min=True, exclude_max=True).filter(lambda f: repr(f) != "-0.0")
    | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=10,
)


@pytest.mark.fuzz
@pytest.mark.django_db
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ARGUMENTS, ARGUMENTS)
def test_arguments_are_stored_as_the_orm_stores_them(first: Any, second: Any) -> None:
    """enqueue() encodes JSON arguments itself on PostgreSQL: the row must hold what Django's
    own JSONField would have written, and the returned job what a read gives back."""
    enqueued = jobs.takes_anything.enqueue(first, key=second)
    through_orm = Job.objects.create(
        name="testapp.jobs.takes_anything", args=[first], kwargs={"key": second}
    )
    stored = Job.objects.get(pk=enqueued.pk)
    expected = Job.objects.get(pk=through_orm.pk)
    # As JSON text, so that 1, 1.0 and True (equal in Python) stay apart.
    assert json.dumps([stored.args, stored.kwargs]) == json.dumps([expected.args, expected.kwargs])
    assert json.dumps([enqueued.args, enqueued.kwargs]) == json.dumps([[first], {"key": second}])


@pytest.mark.django_db
def test_an_enqueue_takes_the_defaults_the_settings_give_now() -> None:
    """Each enqueue reads the job's defaults from the settings as they are at that call."""
    before = jobs.noop.enqueue()
    with override_settings(LEASEJOBS_DEFAULT_QUEUE="elsewhere", LEASEJOBS_MAX_ATTEMPTS=9):
        during = jobs.noop.enqueue()
        with (
            override_settings(LEASEJOBS_MAX_PAYLOAD_BYTES=10),
            pytest.raises(JobValidationError, match="over LEASEJOBS_MAX_PAYLOAD_BYTES"),
        ):
            jobs.noop.enqueue("x" * 20)
    after = jobs.noop.enqueue()
    stored = dict(Job.objects.values_list("pk", "queue"))
    assert [(job.queue, job.max_attempts) for job in (before, during, after)] == [
        ("default", 5),
        ("elsewhere", 9),
        ("default", 5),
    ]
    assert stored == {before.pk: "default", during.pk: "elsewhere", after.pk: "default"}


@pytest.mark.django_db
def test_a_patched_job_default_applies_to_the_next_enqueue() -> None:
    before = jobs.noop.enqueue()
    with mock.patch.object(jobs.noop, "queue", "patched"):
        during = jobs.noop.enqueue()
    after = jobs.noop.enqueue()
    assert [job.queue for job in (before, during, after)] == ["default", "patched", "default"]


@pytest.mark.django_db
def test_an_execute_wrapper_may_enqueue_after_an_enqueue() -> None:
    """The wrapper runs around the enqueue's statement: its own enqueue must not take that
    statement's result away."""
    audit: list[int] = []

    def audited(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        # The values are in the SQL or its parameters, as the connection binds them.
        if "django_leasejobs_job" in sql and "testapp.jobs.add" not in sql + str(params):
            audit.append(jobs.add.enqueue(1, 2).pk)
        return result

    with connection.execute_wrapper(audited):
        job = jobs.noop.enqueue()
    assert Job.objects.get(pk=job.pk).name == "testapp.jobs.noop"
    assert len(audit) == 1
    assert Job.objects.get(pk=audit[0]).args == [1, 2]


@pytest.mark.django_db
@pytest.mark.parametrize("threshold", [None, 5])
def test_values_travel_as_parameters_never_in_the_statement(
    prepare_threshold: Any, threshold: Any
) -> None:
    """The library writes no value into SQL text: the INSERT Django executes holds
    placeholders, and the values are its parameters, whatever the connection prepares."""
    seen: list[tuple[str, Any]] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append((sql, params))
        return execute(sql, params, many, context)

    prepare_threshold(threshold)
    with connection.execute_wrapper(wrapper):
        jobs.takes_anything.enqueue("it's", queue="sent-queue")
        jobs.noop.enqueue(queue="keyed-queue", dedupe_key="the'key")
    inserts = [(sql, params) for sql, params in seen if sql.startswith("INSERT")]
    assert len(inserts) == 2
    for sql, _ in inserts:
        assert "-queue" not in sql
        assert "it''s" not in sql
        assert "the''key" not in sql
        assert "testapp.jobs.noop" not in sql
        assert "testapp.jobs.takes_anything" not in sql
    # Named parameters (PostgreSQL's own INSERT) or positional ones (the ORM's).
    values = [list(p.values()) if isinstance(p, dict) else list(p) for _, p in inserts]
    assert "sent-queue" in values[0]
    assert "the'key" in values[1]
    assert sorted(Job.objects.values_list("queue", flat=True)) == ["keyed-queue", "sent-queue"]


# Text that quoting could get wrong: quotes, backslashes, percent signs, non-ASCII.
TRICKY = st.lists(
    st.sampled_from(["'", "\\", "%", "%s", "''", "\\'", "$1", "é", "😀", "a", " "]), max_size=8
).map("".join)


@pytest.mark.fuzz
@postgresql_only
@pytest.mark.django_db
@settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=TRICKY, key=TRICKY.filter(bool), conforming=st.booleans())
def test_quotes_and_backslashes_are_stored_exactly(
    prepare_threshold: Any, text: str, key: str, conforming: bool
) -> None:
    """Whatever ``standard_conforming_strings`` says (a session may turn it off, and then a
    backslash escapes), every value arrives as it was given."""
    prepare_threshold(None)
    with connection.cursor() as cursor:
        cursor.execute(f"SET standard_conforming_strings = {'on' if conforming else 'off'}")
    try:
        plain = jobs.takes_anything.enqueue(text, **{text: [text]} if text else {})
        keyed = jobs.takes_anything.enqueue(text, dedupe_key=key)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET standard_conforming_strings")
    stored = {job.pk: job for job in Job.objects.filter(pk__in=[plain.pk, keyed.pk])}
    assert stored[plain.pk].args == [text]
    assert stored[plain.pk].kwargs == ({text: [text]} if text else {})
    assert (stored[keyed.pk].args, stored[keyed.pk].dedupe_key) == ([text], key)
    Job.objects.filter(pk__in=[plain.pk, keyed.pk]).delete()


@postgresql_only
@pytest.mark.django_db
def test_a_run_at_keeps_its_instant(prepare_threshold: Any) -> None:
    prepare_threshold(None)
    when = dt.datetime(2031, 3, 30, 1, 30, 15, 123456, tzinfo=ZoneInfo("Europe/Paris"))
    job = jobs.noop.enqueue(run_at=when, priority=-7, max_attempts=2)
    stored = Job.objects.get(pk=job.pk)
    assert (stored.run_at, stored.priority, stored.max_attempts) == (when, -7, 2)
    assert job.run_at == when


def _handler(*args: Any, **kwargs: Any) -> None:
    pass


@postgresql_only
@pytest.mark.django_db
@pytest.mark.parametrize("threshold", [None, 5])
@pytest.mark.parametrize("conforming", ["on", "off"])
@pytest.mark.parametrize("name", ["tests.it's", "tests.back\\slash", "tests.both\\'%s%%"])
def test_a_job_named_with_quotes_and_backslashes_is_stored_by_its_name(
    prepare_threshold: Any,
    monkeypatch: pytest.MonkeyPatch,
    threshold: Any,
    conforming: str,
    name: str,
) -> None:
    """The row holds the name as given, whatever the binding and string-literal setting."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    odd = job(name=name)(_handler)
    prepare_threshold(threshold)
    with connection.cursor() as cursor:
        cursor.execute(f"SET standard_conforming_strings = {conforming}")
    try:
        first = odd.enqueue("a'b\\c", key="%s")
        second = odd.enqueue()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET standard_conforming_strings")
    stored = Job.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk")
    assert [(row.name, row.args, row.kwargs) for row in stored] == [
        (name, ["a'b\\c"], {"key": "%s"}),
        (name, [], {}),
    ]
    assert (first.name, first.args, second.kwargs) == (name, ["a'b\\c"], {})


@contextlib.contextmanager
def client_encoding(value: str) -> Iterator[None]:
    """The session's client encoding set to ``value``, then back to Django's UTF8."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET client_encoding TO '{value}'")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET client_encoding TO 'UTF8'")


@postgresql_only
@pytest.mark.django_db
@pytest.mark.parametrize("threshold", [None, 5])
def test_enqueue_still_works_after_the_client_encoding_is_set_back(
    prepare_threshold: Any, threshold: Any
) -> None:
    prepare_threshold(threshold)
    jobs.noop.enqueue()
    with client_encoding("LATIN1"):
        jobs.noop.enqueue(dedupe_key="a\\b")
    job = jobs.noop.enqueue(dedupe_key="ぁ\\")
    assert Job.objects.get(pk=job.pk).dedupe_key == "ぁ\\"


@postgresql_only
@pytest.mark.django_db
@pytest.mark.parametrize("threshold", [None, 5])
@pytest.mark.parametrize("lease", [5, 0.1, 1e-05, 2.5e20, 1.7976931348623157e308])
def test_a_job_lease_is_stored_exactly(
    prepare_threshold: Any, monkeypatch: pytest.MonkeyPatch, threshold: Any, lease: float
) -> None:
    """A job's lease (a float column) arrives as the same double."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    leased = job(name="tests.leased", lease=lease)(_handler)
    prepare_threshold(threshold)
    first, second = leased.enqueue(), leased.enqueue(1)
    assert set(Job.objects.values_list("lease_seconds", flat=True)) == {float(lease)}
    assert (first.lease_seconds, second.args) == (lease, [1])


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_on_a_terminated_connection_fails_cleanly_then_works_again(
    kill_own_connection: Callable[[], None],
) -> None:
    """A failover under an open connection: the enqueue raises Django's
    DatabaseError and writes nothing; after Django's end-of-request cleanup the next enqueue
    runs on a new connection."""
    first = jobs.noop.enqueue()
    kill_own_connection()
    with pytest.raises(DatabaseError):
        jobs.noop.enqueue(queue="lost")
    close_old_connections()
    after = jobs.noop.enqueue(queue="after")
    assert dict(Job.objects.values_list("pk", "queue")) == {first.pk: "default", after.pk: "after"}
