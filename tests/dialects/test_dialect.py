"""One suite for every dialect: the same tests run unchanged on SQLite, PostgreSQL (both
bindings) and MariaDB, whichever ``DATABASE_URL`` names (CI runs each).

Each test calls the dialect of the test database directly, as the protocol does, and checks
the rows it leaves against what the ORM reads back.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import JSONField

from django_leasejobs import dialects
from django_leasejobs.dbtime import db_now
from django_leasejobs.dialects import Completion, Token
from django_leasejobs.models import Job, Status

from ..conftest import shifted

pytestmark = pytest.mark.django_db

NOOP = "testapp.jobs.noop"
NOT_CLAIMED_ON_POSTGRESQL = {"errors", "result", "last_error"}


@pytest.fixture
def dialect() -> dialects.Dialect:
    return dialects.for_alias(DEFAULT_DB_ALIAS)


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
    return dialect.insert_many([values(**given) for _ in range(count)], DEFAULT_DB_ALIAS)


class TestInsert:
    def test_a_row_comes_back_as_the_orm_reads_it(self, dialect: dialects.Dialect) -> None:
        job = dialect.insert(
            values(args=[1, "é", {"deep": [None, True, 2.5]}], kwargs={"k": "v"}, priority=3),
            DEFAULT_DB_ALIAS,
        )
        assert job.pk is not None
        assert (job.status, job.attempt, job.priority) == (Status.PENDING, 0, 3)
        assert job.run_at is not None
        assert job.created_at is not None
        same_as_a_read(job)

    def test_attnames_and_field_names_both_work(self, dialect: dialects.Dialect) -> None:
        when = db_now() + dt.timedelta(hours=1)
        job = dialect.insert(values(run_at=when, occurrence_at=when), DEFAULT_DB_ALIAS)
        assert Job.objects.get(pk=job.pk).run_at == when
        same_as_a_read(job)

    def test_many_rows_come_back_in_order(self, dialect: dialects.Dialect) -> None:
        rows = [values(args=[i], priority=i % 3) for i in range(7)]
        jobs = dialect.insert_many(iter(rows), DEFAULT_DB_ALIAS)
        assert [job.args for job in jobs] == [[i] for i in range(7)]
        assert [job.pk for job in jobs] == sorted(job.pk for job in jobs)
        for job in jobs:
            same_as_a_read(job)
        assert dialect.insert_many([], DEFAULT_DB_ALIAS) == []


class TestClaim:
    def test_due_rows_in_priority_then_run_at_order(self, dialect: dialects.Dialect) -> None:
        low, high, later = make(dialect, priority=0), make(dialect, priority=9), make(dialect)
        Job.objects.filter(pk=later[0].pk).update(run_at=shifted(3600))
        claimed = dialect.claim(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0)
        assert sorted(job.pk for job in claimed) == sorted([low[0].pk, high[0].pk])
        for job in claimed:
            assert (job.status, job.attempt, job.lease_owner) == (Status.RUNNING, 1, "w1")
            assert job.lease_expires_at > db_now() + dt.timedelta(seconds=25)
            same_as_a_read(job)
        if connection.vendor == "postgresql":
            assert claimed[0].get_deferred_fields() == NOT_CLAIMED_ON_POSTGRESQL

    def test_batch_and_queues_limit_the_claim(self, dialect: dialects.Dialect) -> None:
        make(dialect, 3, queue="a")
        make(dialect, 2, queue="b")
        make(dialect, 2, queue="c")
        assert len(dialect.claim(DEFAULT_DB_ALIAS, "w1", ["a"], 2, 30.0)) == 2
        both = dialect.claim(DEFAULT_DB_ALIAS, "w1", ["a", "b"], 10, 30.0)
        assert sorted(job.queue for job in both) == ["a", "b", "b"]
        rest = dialect.claim(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0)
        assert sorted(job.queue for job in rest) == ["c", "c"]
        assert dialect.claim(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0) == []

    def test_a_job_own_lease_wins_over_the_worker_lease(self, dialect: dialects.Dialect) -> None:
        (job,) = make(dialect, lease_seconds=600.0)
        (claimed,) = dialect.claim(DEFAULT_DB_ALIAS, "w1", None, 1, 30.0)
        assert claimed.pk == job.pk
        assert claimed.lease_expires_at > db_now() + dt.timedelta(seconds=500)

    def test_running_and_finished_rows_are_not_claimed(self, dialect: dialects.Dialect) -> None:
        running, done, failed = make(dialect), make(dialect), make(dialect)
        Job.objects.filter(pk=running[0].pk).update(status=Status.RUNNING)
        Job.objects.filter(pk=done[0].pk).update(status=Status.SUCCEEDED)
        Job.objects.filter(pk=failed[0].pk).update(status=Status.FAILED)
        claimed = dialect.claim(DEFAULT_DB_ALIAS, "w1", None, 10, 30.0)
        assert [job.pk for job in claimed] == [failed[0].pk]


class TestRenewAndComplete:
    def claimed(self, dialect: dialects.Dialect, count: int) -> list[Job]:
        make(dialect, count)
        return dialect.claim(DEFAULT_DB_ALIAS, "w1", None, count, 30.0)

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
        assert done == {first.pk, second.pk}
        rows = {job.pk: job for job in Job.objects.all()}
        assert (rows[first.pk].status, rows[first.pk].result) == (Status.SUCCEEDED, result)
        assert (rows[first.pk].finished_by, rows[first.pk].lease_owner) == ("w1", "")
        assert rows[second.pk].result is None
        assert (rows[stale.pk].status, rows[stale.pk].attempt) == (Status.RUNNING, 1)


def test_only_json_fields_need_a_converter() -> None:
    """The PostgreSQL claim converts JSON columns only: a new field with a converter must be
    added to its ``fetch_jobs``."""
    converted = {f.name for f in Job._meta.concrete_fields if hasattr(f, "from_db_value")}
    assert converted == {f.name for f in Job._meta.concrete_fields if isinstance(f, JSONField)}
