"""One suite for every dialect: the same tests run unchanged on SQLite, PostgreSQL (both
bindings) and MariaDB, whichever ``DATABASE_URL`` names (CI runs each), each with the
database's own dialect and with the ORM's ``Dialect()`` (``conftest.dialect``).

Each test calls the dialect directly, as the protocol does, and checks the rows it leaves
against what the ORM reads back.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections, transaction
from django.db.models import F, JSONField
from django.test.utils import CaptureQueriesContext
from testapp import jobs

from django_leasejobs import dialects
from django_leasejobs.core import notify
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.dialects import Completion, Token, base, sql
from django_leasejobs.dialects.fair_lines import Group as FairGroup
from django_leasejobs.dialects.mysql import MySQLDialect
from django_leasejobs.dialects.postgresql import PostgreSQLDialect
from django_leasejobs.dialects.postgresql import sql as postgresql_sql
from django_leasejobs.dialects.sqlite import SQLiteDialect
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, JobLog, Limiter, Pause, Status, Worker
from django_leasejobs.runtime.listener import Listener

from ..conftest import shifted
from .conftest import hold_key

pytestmark = pytest.mark.django_db

NOOP = "testapp.jobs.noop"
NOT_CLAIMED_ON_POSTGRESQL = {"errors", "result", "last_error"}


def values(**given: Any) -> dict[str, Any]:
    """A new row's values as the protocol hands them to a dialect."""
    return {"name": NOOP, "args": [], "kwargs": {}, "queue": "default", **given}


def same_as_a_read(job: Job) -> None:
    """Every loaded field of ``job`` equals, with the same type, what the ORM reads."""
    read = Job.objects.get(pk=job.pk)
    deferred = job.get_deferred_fields()
    for field in Job._meta.concrete_fields:
        if field.attname in deferred:
            continue
        mine, theirs = getattr(job, field.attname), getattr(read, field.attname)
        if isinstance(field, JSONField):  # 1 == 1.0 == True in Python, not in JSON
            mine, theirs = json.dumps(mine, sort_keys=True), json.dumps(theirs, sort_keys=True)
        assert mine == theirs, field.name
        # A model default keeps its own type, as Django's save() leaves it (Status.PENDING).
        assert isinstance(mine, type(theirs)), field.name
    assert job._state.db == read._state.db
    assert job._state.adding is False


def make(dialect: dialects.Dialect, count: int = 1, **given: Any) -> list[Job]:
    return dialect.insert_many(DEFAULT_DB_ALIAS, [values(**given) for _ in range(count)])


class TestInsert:
    def test_a_row_comes_back_as_the_orm_reads_it(self, dialect: dialects.Dialect) -> None:
        job = dialect.insert(
            DEFAULT_DB_ALIAS,
            values(args=[1, "é", {"deep": [None, True, 2.5]}], kwargs={"k": "v"}, priority=3),
        )
        assert job.pk is not None
        assert (job.status, job.attempt, job.priority) == (Status.PENDING, 0, 3)
        assert job.run_at is not None
        assert job.created_at is not None
        same_as_a_read(job)

    def test_attnames_and_field_names_both_work(self, dialect: dialects.Dialect) -> None:
        when = db_now() + dt.timedelta(hours=1)
        job = dialect.insert(DEFAULT_DB_ALIAS, values(run_at=when, occurrence_at=when))
        assert Job.objects.get(pk=job.pk).run_at == when
        same_as_a_read(job)

    def test_many_rows_come_back_in_order(self, dialect: dialects.Dialect) -> None:
        rows = [values(args=[i], priority=i % 3) for i in range(7)]
        jobs = dialect.insert_many(DEFAULT_DB_ALIAS, iter(rows))
        assert [job.args for job in jobs] == [[i] for i in range(7)]
        assert [job.pk for job in jobs] == sorted(job.pk for job in jobs)
        for job in jobs:
            same_as_a_read(job)
        assert dialect.insert_many(DEFAULT_DB_ALIAS, []) == []

    def test_model_rows_get_their_ids_in_order(self, dialect: dialects.Dialect) -> None:
        rows = [Job(**values(args=[i])) for i in range(3)]
        dialect.insert_rows(DEFAULT_DB_ALIAS, rows)
        assert [row.pk for row in rows] == sorted(row.pk for row in rows)
        assert [Job.objects.get(pk=row.pk).args for row in rows] == [[0], [1], [2]]
        dialect.insert_rows(DEFAULT_DB_ALIAS, [])


class TestSendable:
    def test_a_utf8_session_takes_any_text(self, dialect: dialects.Dialect) -> None:
        dialect.check_sendable(DEFAULT_DB_ALIAS, [("dedupe_key", "¥ é ~")])
        dialect.require_utf8(DEFAULT_DB_ALIAS, "replay")

    def test_a_session_that_would_change_text_refuses_it(
        self, vendor_dialect: dialects.Dialect
    ) -> None:
        if not isinstance(vendor_dialect, PostgreSQLDialect):
            pytest.skip("client_encoding is a PostgreSQL session's")
        with connection.cursor() as cursor:
            cursor.execute("SET client_encoding TO 'SJIS'")
        try:
            with pytest.raises(JobValidationError, match="client_encoding"):
                vendor_dialect.check_sendable(DEFAULT_DB_ALIAS, [("dedupe_key", "¥")])
            with pytest.raises(JobValidationError, match="client_encoding"):
                vendor_dialect.require_utf8(DEFAULT_DB_ALIAS, "replay")
            vendor_dialect.check_sendable(DEFAULT_DB_ALIAS, [("dedupe_key", "ascii")])
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET client_encoding TO 'UTF8'")


class TestClaim:
    def test_due_rows_in_priority_then_run_at_order(self, dialect: dialects.Dialect) -> None:
        low, high, later = make(dialect, priority=0), make(dialect, priority=9), make(dialect)
        Job.objects.filter(pk=later[0].pk).update(run_at=shifted(3600))
        claimed = dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0)
        assert sorted(job.pk for job in claimed) == sorted([low[0].pk, high[0].pk])
        for job in claimed:
            assert (job.status, job.attempt, job.lease_owner) == (Status.RUNNING, 1, "w1")
            assert job.lease_expires_at > db_now() + dt.timedelta(seconds=25)
            same_as_a_read(job)
        if isinstance(dialect, PostgreSQLDialect):
            assert claimed[0].get_deferred_fields() == NOT_CLAIMED_ON_POSTGRESQL

    def test_batch_and_queues_limit_the_claim(self, dialect: dialects.Dialect) -> None:
        make(dialect, 3, queue="a")
        make(dialect, 2, queue="b")
        make(dialect, 2, queue="c")
        assert len(dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", ["a"], 2, 30.0)) == 2
        both = dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", ["a", "b"], 10, 30.0)
        assert sorted(job.queue for job in both) == ["a", "b", "b"]
        rest = dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0)
        assert sorted(job.queue for job in rest) == ["c", "c"]
        assert dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0) == []

    def test_a_job_own_lease_wins_over_the_worker_lease(self, dialect: dialects.Dialect) -> None:
        (job,) = make(dialect, lease_seconds=600.0)
        (claimed,) = dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", None, 1, 30.0)
        assert claimed.pk == job.pk
        assert claimed.lease_expires_at > db_now() + dt.timedelta(seconds=500)

    def test_running_and_finished_rows_are_not_claimed(self, dialect: dialects.Dialect) -> None:
        running, done, failed = make(dialect), make(dialect), make(dialect)
        Job.objects.filter(pk=running[0].pk).update(status=Status.RUNNING)
        Job.objects.filter(pk=done[0].pk).update(status=Status.SUCCEEDED)
        Job.objects.filter(pk=failed[0].pk).update(status=Status.FAILED)
        claimed = dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0)
        assert [job.pk for job in claimed] == [failed[0].pk]


class TestRenewAndComplete:
    def claimed(self, dialect: dialects.Dialect, count: int) -> list[Job]:
        make(dialect, count)
        return dialect.claim_limited(DEFAULT_DB_ALIAS, "w1", None, count, 30.0)

    def test_renew_keeps_only_the_tokens_that_hold(self, dialect: dialects.Dialect) -> None:
        mine, stolen, wrong = self.claimed(dialect, 3)
        Job.objects.filter(pk=stolen.pk).update(lease_owner="w2")
        Job.objects.filter(pk=mine.pk).update(lease_expires_at=shifted(5))
        tokens = [Token(mine.pk, 1), Token(stolen.pk, 1), Token(wrong.pk, 2)]
        renewed = dialect.renew(DEFAULT_DB_ALIAS, "w1", tokens, 120.0)
        assert renewed.kept == {mine.pk}
        assert renewed.cancel_requested == set()
        assert Job.objects.get(pk=mine.pk).lease_expires_at > db_now() + dt.timedelta(seconds=100)

    def test_renew_returns_the_kept_jobs_an_operator_asked_to_cancel(
        self, dialect: dialects.Dialect
    ) -> None:
        asked, plain, asked_but_stolen = self.claimed(dialect, 3)
        Job.objects.filter(pk__in=[asked.pk, asked_but_stolen.pk]).update(
            cancel_requested_at=db_now()
        )
        Job.objects.filter(pk=asked_but_stolen.pk).update(lease_owner="w2")
        tokens = [Token(job.pk, 1) for job in (asked, plain, asked_but_stolen)]
        renewed = dialect.renew(DEFAULT_DB_ALIAS, "w1", tokens, 120.0)
        assert renewed.kept == {asked.pk, plain.pk}
        assert renewed.cancel_requested == {asked.pk}
        # The request is only read: the row stays running until its worker ends the attempt.
        assert Job.objects.get(pk=asked.pk).status == Status.RUNNING

    @pytest.mark.parametrize("result", [None, {"answer": 42}])
    def test_complete_many_fences_each_row(self, dialect: dialects.Dialect, result: Any) -> None:
        first, second, stale = self.claimed(dialect, 3)
        completions = [
            Completion(first.pk, 1, result),
            Completion(second.pk, 1),
            Completion(stale.pk, 2, result),
        ]
        done = dialect.complete_many(DEFAULT_DB_ALIAS, completions, "w1")
        assert done == ({first.pk, second.pk}, set())
        rows = {job.pk: job for job in Job.objects.all()}
        assert (rows[first.pk].status, rows[first.pk].result) == (Status.SUCCEEDED, result)
        assert (rows[first.pk].finished_by, rows[first.pk].lease_owner) == ("w1", "")
        assert rows[second.pk].result is None
        assert (rows[stale.pk].status, rows[stale.pk].attempt) == (Status.RUNNING, 1)

    @pytest.mark.parametrize("result", [None, {"answer": 42}])
    def test_complete_many_writes_all_or_nothing(
        self, dialect: dialects.Dialect, result: Any
    ) -> None:
        """The connection fails at the batch's last statement on the job table (its second
        UPDATE, or the read after the UPDATE, on the ORM's way): none is written, so the
        worker's try of the whole batch again completes every job instead of finding some
        already succeeded and reporting them stale."""
        jobs = self.claimed(dialect, 3)
        completions = [Completion(job.pk, 1, result) for job in jobs]
        table = Job._meta.db_table
        with CaptureQueriesContext(connection) as seen, transaction.atomic():
            dialect.complete_many(DEFAULT_DB_ALIAS, completions, "w1")
            transaction.set_rollback(True)
        last = sum(1 for query in seen.captured_queries if table in query["sql"])
        sent = 0

        def fail_the_last(execute, sql, params, many, context):
            nonlocal sent
            if table in sql:
                sent += 1
                if sent == last:
                    raise OperationalError("server closed the connection (injected)")
            return execute(sql, params, many, context)

        with connection.execute_wrapper(fail_the_last), pytest.raises(OperationalError):
            dialect.complete_many(DEFAULT_DB_ALIAS, completions, "w1")
        assert set(Job.objects.values_list("status", flat=True)) == {Status.RUNNING}
        done = dialect.complete_many(DEFAULT_DB_ALIAS, completions, "w1")
        assert done.jobs == {j.pk for j in jobs}

    @pytest.mark.parametrize("result", [None, {"answer": 42}])
    def test_complete_one_is_fenced_by_its_token(
        self, dialect: dialects.Dialect, result: Any
    ) -> None:
        job, stale = self.claimed(dialect, 2)
        assert dialect.complete_one(DEFAULT_DB_ALIAS, Completion(job.pk, 1, result), "w1")
        assert not dialect.complete_one(DEFAULT_DB_ALIAS, Completion(stale.pk, 2, result), "w1")
        assert not dialect.complete_one(DEFAULT_DB_ALIAS, Completion(job.pk, 1, result), "w1")
        rows = {row.pk: row for row in Job.objects.all()}
        assert (rows[job.pk].status, rows[job.pk].result) == (Status.SUCCEEDED, result)
        assert (rows[stale.pk].status, rows[stale.pk].attempt) == (Status.RUNNING, 1)


def test_only_json_fields_need_a_converter() -> None:
    """The PostgreSQL claim converts JSON columns only: a new field with a converter must be
    added to its ``fetch_jobs``."""
    converted = {f.name for f in Job._meta.concrete_fields if hasattr(f, "from_db_value")}
    assert converted == {f.name for f in Job._meta.concrete_fields if isinstance(f, JSONField)}


@pytest.mark.django_db(transaction=True)
class TestAnnounce:
    """PostgreSQL's dialect notifies at commit; the ORM's has no way to, and sends nothing."""

    @pytest.fixture
    def listener(self) -> Iterator[Listener | None]:
        if connection.vendor != "postgresql":
            yield None
            return
        listener = Listener()
        listener.start()
        assert listener.connected()
        yield listener
        listener.close()

    def test_announce_wakes_the_queues_listeners_at_commit(
        self, dialect: dialects.Dialect, listener: Listener | None
    ) -> None:
        with CaptureQueriesContext(connection) as sent, transaction.atomic():
            dialect.announce(DEFAULT_DB_ALIAS, ["a", "b"])
            dialect.announce(DEFAULT_DB_ALIAS, [])
            if listener is not None:
                assert listener.wait(0.2) == set()  # not before the commit
        if not isinstance(dialect, PostgreSQLDialect):
            assert [q["sql"] for q in sent if "notify" in q["sql"].lower()] == []
            return
        assert listener is not None
        heard: set[str] = set()
        for _ in range(3):
            heard |= listener.wait(1)
        assert heard == {"a", "b"}

    def test_announce_cancel_tells_the_job_id_at_commit(
        self, dialect: dialects.Dialect, listener: Listener | None
    ) -> None:
        with CaptureQueriesContext(connection) as sent, transaction.atomic():
            dialect.announce_cancel(DEFAULT_DB_ALIAS, 42)
        if not isinstance(dialect, PostgreSQLDialect):
            assert [q["sql"] for q in sent if "notify" in q["sql"].lower()] == []
            return
        assert listener is not None
        listener.wait(1)
        assert listener.take_cancels() == {42}

    def test_announce_finished_tells_waiters_the_ids_at_commit(
        self, dialect: dialects.Dialect
    ) -> None:
        listening = None
        if isinstance(dialect, PostgreSQLDialect):  # the only one that announces
            listening = connection.get_new_connection(connection.get_connection_params())
            listening.autocommit = True
            listening.execute(f"LISTEN {notify.FINISHED_CHANNEL}")
        try:
            with CaptureQueriesContext(connection) as sent, transaction.atomic():
                dialect.announce_finished(DEFAULT_DB_ALIAS, [7, 8])
                dialect.announce_finished(DEFAULT_DB_ALIAS, [])
            if listening is None:
                assert [q["sql"] for q in sent if "notify" in q["sql"].lower()] == []
                return
            heard = [
                job_id
                for notice in listening.notifies(timeout=5, stop_after=1)
                for job_id in notify.finished_ids(notice.payload)
            ]
            assert sorted(heard) == [7, 8]
        finally:
            if listening is not None:
                listening.close()


WORKER_ROW = {
    "worker_id": "w1", "host": "h", "pid": 1, "queues": "*", "version": "1",
    "concurrency": 1, "async_concurrency": 0, "lease_seconds": 5.0, "running": 1, "stuck": 0,
}  # fmt: skip


class TestUpsertWorker:
    def test_the_first_beat_inserts_a_later_one_updates_and_keeps_started_at(
        self, dialect: dialects.Dialect
    ) -> None:
        dialect.upsert_worker(DEFAULT_DB_ALIAS, WORKER_ROW)
        first = Worker.objects.get(worker_id="w1")
        assert first.started_at == first.last_seen_at
        Worker.objects.update(started_at=shifted(-3600), last_seen_at=shifted(-3600))
        before = Worker.objects.get(worker_id="w1")
        dialect.upsert_worker(DEFAULT_DB_ALIAS, {**WORKER_ROW, "running": 0, "stuck": 2})
        after = Worker.objects.get(worker_id="w1")
        assert Worker.objects.count() == 1
        assert (after.running, after.stuck, after.started_at) == (0, 2, before.started_at)
        assert after.last_seen_at - before.last_seen_at > dt.timedelta(minutes=59)

    def test_each_beat_is_one_statement(self, dialect: dialects.Dialect) -> None:
        for running in (1, 2):  # the insert, then the update of the same row
            with CaptureQueriesContext(connection) as sent:
                dialect.upsert_worker(DEFAULT_DB_ALIAS, {**WORKER_ROW, "running": running})
            assert len(sent) == 1, [q["sql"] for q in sent]


DAY = dt.timedelta(days=1)


def limiter(key: str, *, window_seconds_ago: float | None = None) -> None:
    Limiter.objects.create(key=key, name=key[2:], started=1)
    if window_seconds_ago is not None:
        Limiter.objects.filter(key=key).update(window_start=shifted(-window_seconds_ago))


class TestPruneLimiters:
    def test_spent_windows_and_idle_keys_go_in_key_order_batches(
        self, dialect: dialects.Dialect
    ) -> None:
        for name in ("r:a", "r:b", "r:d"):
            limiter(name, window_seconds_ago=2 * DAY.total_seconds())
        limiter("r:never")  # created by a claim that started nothing
        limiter("r:current", window_seconds_ago=30)
        limiter("c:idle")
        limiter("c:busy")
        make(dialect, concurrency_key="busy", concurrency_limit=1)
        Job.objects.update(status=Status.RUNNING)
        assert dialect.prune_limiters(DEFAULT_DB_ALIAS, DAY, 3, "") == (3, "r:b")
        assert set(Limiter.objects.values_list("key", flat=True)) == {
            "c:busy", "r:current", "r:d", "r:never",
        }  # fmt: skip
        assert dialect.prune_limiters(DEFAULT_DB_ALIAS, DAY, 3, "r:b") == (2, "r:never")
        assert dialect.prune_limiters(DEFAULT_DB_ALIAS, DAY, 3, "r:never") == (0, "r:never")
        assert set(Limiter.objects.values_list("key", flat=True)) == {"c:busy", "r:current"}


@pytest.mark.django_db(transaction=True)
def test_prune_limiters_passes_over_a_key_a_claimer_holds(dialect: dialects.Dialect) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its write lock serializes pruning with claims")
    limiter("r:held", window_seconds_ago=2 * DAY.total_seconds())
    limiter("r:free", window_seconds_ago=2 * DAY.total_seconds())
    holder = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            hold_key(holder, cursor, "r:held")
            deleted, _ = dialect.prune_limiters(DEFAULT_DB_ALIAS, DAY, 10, "")
            assert deleted == 1
            cursor.execute("ROLLBACK")
    finally:
        holder.close()
    assert set(Limiter.objects.values_list("key", flat=True)) == {"r:held"}
    assert dialect.prune_limiters(DEFAULT_DB_ALIAS, DAY, 10, "") == (1, "r:held")


OPERATIONS = {
    "insert", "insert_many", "insert_rows", "claim_limited", "renew", "complete_many",
    "announce", "announce_cancel", "prune_limiters", "upsert_worker",
    # Each ended attempt's logs, in the transaction that completes it (runtime/job_logs.py).
    "insert_logs",
    # Text a session would change on its way is refused before it is sent (PostgreSQL's).
    "check_sendable", "require_utf8",
    # Finishes wake callers waiting for a job (``job.wait()``) where the database can.
    "complete_one", "announce_finished",
    # A batch of workflow successes, with their steps and runs (test_complete_steps.py).
    "complete_steps", "count_steps",
}  # fmt: skip
CAPABILITIES = {"notifies", "utc_session", "journal_mode_query", "replication"}


@pytest.mark.parametrize("cls", [dialects.Dialect, PostgreSQLDialect, SQLiteDialect, MySQLDialect])
def test_the_interface_is_one_public_method_per_operation(cls: type[dialects.Dialect]) -> None:
    """Steps of an operation are private to the dialect: a database adds none to the
    interface, and the protocol has nothing to call but the operations. Beside them, only
    the capabilities, attributes that are not called."""
    public = {name for name in dir(cls) if not name.startswith("_")}
    assert public == OPERATIONS | CAPABILITIES
    assert {name for name in public if callable(getattr(cls, name))} == OPERATIONS
    assert set(base.OPERATIONS) == OPERATIONS


def test_the_capabilities_are_the_database_s(vendor_dialect: dialects.Dialect) -> None:
    """What the layers above ask instead of ``connection.vendor``; the ORM's dialect has none."""
    vendor = connection.vendor
    assert vendor_dialect.notifies is (vendor == "postgresql")
    assert (vendor_dialect.utc_session is not None) is (vendor == "mysql")
    assert (vendor_dialect.journal_mode_query is not None) is (vendor == "sqlite")
    has_replication = vendor in ("postgresql", "mysql")
    assert (vendor_dialect.replication is not dialects.Dialect.replication) is has_replication
    orm = dialects.Dialect()
    assert (orm.notifies, orm.utc_session, orm.journal_mode_query) == (False, None, None)
    assert dialects.for_connection(connection) is dialects.for_alias(DEFAULT_DB_ALIAS)


def test_this_suite_calls_every_operation_on_the_dialect_under_test() -> None:
    """Each operation is called as ``dialect.<operation>(`` in this suite, where ``dialect`` is
    the fixture that runs it with the database's own dialect and with the ORM's."""
    suite = "".join(path.read_text() for path in Path(__file__).parent.glob("test_*.py"))
    called = set(re.findall(r"\bdialect\.([a-z_0-9]+)\(", suite))
    assert called >= OPERATIONS, OPERATIONS - called


def test_the_tables_the_statements_name_literally_are_the_models() -> None:
    assert Job._meta.db_table == sql.JOB
    assert Limiter._meta.db_table == sql.LIMITER
    assert Pause._meta.db_table == sql.PAUSE
    assert JobLog._meta.db_table == sql.JOB_LOG
    assert (postgresql_sql.JOB, postgresql_sql.LIMITER, postgresql_sql.PAUSE) == (
        sql.JOB, sql.LIMITER, sql.PAUSE,
    )  # fmt: skip


def test_named_parameters_reach_the_database_through_django_cursor() -> None:
    """The dialects' statements take ``%(name)s`` parameters from a dict, each name as often as
    the statement needs it: Django's cursor passes them to psycopg and mysqlclient as they
    are, and converts them for SQLite."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT %(n)s, %(text)s, %(n)s", {"n": 7, "text": "it's 100%"})
        assert tuple(cursor.fetchone()) == (7, "it's 100%", 7)


@pytest.mark.django_db
def test_insert_logs_writes_each_attempts_row_as_given(dialect: dialects.Dialect) -> None:
    first, second = jobs.noop.enqueue(), jobs.noop.enqueue()
    records = [
        {"level": "INFO", "logger": "shop", "message": "naïve 'quoted' \"text\" \\ {}", "at": "Z"},
        {"attempt": 1, "dropped": 3},
    ]
    dialect.insert_logs(
        DEFAULT_DB_ALIAS,
        [
            dialects.LogRow(first.pk, 1, records, 120),
            dialects.LogRow(first.pk, 2, [], 0),
            dialects.LogRow(second.pk, 1, records[:1], 64),
        ],
    )
    rows = JobLog.objects.order_by("job_id", "attempt").values_list(
        "job_id", "attempt", "records", "size"
    )
    assert list(rows) == [
        (first.pk, 1, records, 120),
        (first.pk, 2, [], 0),
        (second.pk, 1, records[:1], 64),
    ]


def test_fair_lines_read_each_keys_place_and_its_queues_head(dialect: dialects.Dialect) -> None:
    """The step of the inserts that reads a fair key's line (``_fair_lines``). The head is the
    queue's earliest waiting fair job at the key's priority; a key's last place is among its
    waiting jobs only, counted; the clock is the database's."""
    jobs.per_account.enqueue_many([(("a",), {"n": n}) for n in range(3)])
    jobs.per_account.using(fair_weight=2).enqueue_many([(("b",), {"n": n}) for n in range(3)])
    c = jobs.per_account.using(priority=5).enqueue("c")
    jobs.noop.enqueue()  # no key: never the head
    a = list(Job.objects.filter(fair_key="account:a").order_by("id"))
    b = list(Job.objects.filter(fair_key="account:b").order_by("id"))
    Job.objects.filter(pk=a[-1].pk).update(status=Status.SUCCEEDED)  # finished: no place
    Job.objects.filter(fair_key__isnull=False).update(run_at=F("run_at") - dt.timedelta(hours=1))
    Job.objects.filter(fair_key__isnull=False).update(fair_at=F("run_at"))
    before = db_now()
    groups = [
        FairGroup("default", 0, "account:a"),
        FairGroup("default", 0, "account:b"),
        FairGroup("default", 0, "account:new"),
        FairGroup("default", 5, "account:a"),
        FairGroup("elsewhere", 0, "account:a"),
    ]
    lines = dialect._fair_lines(DEFAULT_DB_ALIAS, groups)
    hour = dt.timedelta(hours=1)
    head = a[0].run_at - hour
    assert [line.head for line in lines] == [head, head, head, c.run_at - hour, None]
    assert [(line.last, line.at_last) for line in lines] == [
        (a[1].run_at - hour, 1),
        (b[2].run_at - hour, 1),  # weight 2: two at b's first place, one at its second
        (None, 0),
        (None, 0),
        (None, 0),
    ]
    assert b[0].run_at == b[1].run_at < b[2].run_at
    assert all(before <= line.now <= db_now() for line in lines)
    assert dialect._fair_lines(DEFAULT_DB_ALIAS, []) == []


def test_an_insert_places_a_fair_row_behind_its_key_or_at_its_queues_head(
    dialect: dialects.Dialect,
) -> None:
    """Each database's ``insert`` (PostgreSQL's in its own statement) gives a fair row the
    place ``core.fairness.Place`` says, and returns the row as stored."""
    from django_leasejobs.protocol.new_rows import row_values

    def insert(key: str, n: int, **options: Any) -> Job:
        values = row_values("testapp.jobs.per_account", [key, n], {}, **options)
        return dialect.insert(DEFAULT_DB_ALIAS, values)

    step = dt.timedelta(microseconds=1)
    first = insert("a", 0)
    second = insert("a", 1)
    newcomer = insert("b", 0)
    heavy = [insert("c", n, fair_weight=2) for n in range(3)]
    later = insert("a", 2, delay=3600)
    assert first.fair_at is not None
    assert second.fair_at == first.fair_at + step
    assert newcomer.fair_at == first.fair_at  # the head: behind it by id
    assert [job.fair_at for job in heavy] == [first.fair_at, first.fair_at, first.fair_at + step]
    assert later.fair_at is None
    assert later.run_at > first.run_at + dt.timedelta(minutes=59)
    for job in (first, second, newcomer, *heavy, later):
        stored = Job.objects.values_list("run_at", "fair_at").get(pk=job.pk)
        assert stored == (job.run_at, job.fair_at)
        assert job.fair_at in (None, job.run_at)
