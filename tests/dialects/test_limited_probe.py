"""``_limited_due``: the probe every limited claim sends first, on every dialect (and the ORM's,
on every database), and the plan of each database's own: it reads an index, never the whole table.

A drain of jobs with limits leaves claimed and finished rows ahead of the waiting ones, and a
backlog without limits is all due rows. A probe planned as a sequential scan (PostgreSQL), a
table scan (SQLite: its partial index was never used with bound statuses) or a read of every
due row (MySQL: no partial indexes) paid for all of them on every claim, with or without
limits (docs/benchmarks.md). The plan tests fix the shape, not a duration.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection
from testapp import jobs

from django_leasejobs import dialects
from django_leasejobs.dialects.postgresql import PostgreSQLDialect
from django_leasejobs.dialects.sqlite import SQLiteDialect
from django_leasejobs.models import Job, Status

from ..conftest import shifted
from ..plans import explain, scanned_tables, statements

pytestmark = pytest.mark.django_db

BATCH = 10


def due(dialect: dialects.Dialect, queues: list[str] | None, batch: int = BATCH) -> bool:
    return dialect._limited_due(DEFAULT_DB_ALIAS, queues, batch)


def limited(count: int, queue: str = "default", priority: int = 0) -> list[Job]:
    items = [{"args": [n], "queue": queue, "delay": 60, "priority": priority} for n in range(count)]
    return jobs.per_customer.enqueue_many(items)


def make_due(*queues: str) -> None:
    Job.objects.filter(queue__in=queues).update(run_at=shifted(-1))


def test_no_job_with_limits_is_no_probe_hit(dialect: dialects.Dialect) -> None:
    jobs.noop.enqueue()
    make_due("default")
    assert due(dialect, None) is False
    assert due(dialect, ["default"]) is False


def test_a_due_job_with_limits_is_found_in_its_queue_only(dialect: dialects.Dialect) -> None:
    limited(1, queue="b")
    assert due(dialect, None) is False  # not due yet
    make_due("b")
    assert due(dialect, None) is True
    assert due(dialect, ["b"]) is True
    assert due(dialect, ["a", "b"]) is True
    assert due(dialect, ["a"]) is False


def test_running_and_finished_jobs_with_limits_are_not_due(dialect: dialects.Dialect) -> None:
    running, done = limited(2)
    make_due("default")
    Job.objects.filter(pk=running.pk).update(status=Status.RUNNING)
    Job.objects.filter(pk=done.pk).update(status=Status.SUCCEEDED)
    assert due(dialect, None) is False
    assert due(dialect, ["default"]) is False
    Job.objects.filter(pk=running.pk).update(status=Status.FAILED)  # waiting for its retry
    assert due(dialect, ["default"]) is True


def test_a_job_with_limits_behind_a_full_batch_changes_no_claim(
    dialect: dialects.Dialect,
) -> None:
    # Without an index of jobs with limits, the probe looks at the first ``batch`` due jobs in
    # claim order only: a job with limits behind them would not be taken by this claim
    # anyway. Either answer, the claim takes the same jobs.
    ahead = jobs.noop.enqueue_many([{"priority": 5, "delay": 60} for _ in range(BATCH)])
    (behind,) = limited(1)
    make_due("default")
    assert due(dialect, ["default"], batch=BATCH + 1) is True
    if not isinstance(dialect, PostgreSQLDialect | SQLiteDialect):  # the ORM's probe
        assert due(dialect, ["default"], batch=BATCH) is False
    taken = claim(dialect, BATCH)
    assert {job.pk for job in taken} == {job.pk for job in ahead}
    assert claim(dialect, BATCH)[0].pk == behind.pk


def claim(dialect: dialects.Dialect, batch: int) -> list[Job]:
    return dialect.claim_limited(DEFAULT_DB_ALIAS, "w", ["default"], batch, 60.0)


def the_probe(dialect: dialects.Dialect, queues: list[str] | None) -> tuple[str, Any]:
    with statements() as sent:
        assert due(dialect, queues) is True
    (probe,) = sent
    return probe


@pytest.mark.parametrize("queues", [None, ["default"], ["default", "other"]])
def test_probe_reads_an_index_when_most_rows_have_limits(
    vendor_dialect: dialects.Dialect, queues: list[str] | None
) -> None:
    # The drain's state: statistics taken when every row was a due job with limits, then the
    # first half claimed and finished (their rows now lie ahead of the waiting ones).
    if connection.vendor not in ("postgresql", "sqlite") and queues != ["default"]:
        pytest.skip("MySQL orders several queues' due jobs with a sort, as its claim does")
    made = limited(2000)
    make_due("default")
    table = Job._meta.db_table
    if connection.vendor != "mysql":  # MySQL's ANALYZE TABLE commits the test's transaction
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
    Job.objects.filter(pk__lte=made[999].pk).update(status=Status.SUCCEEDED)
    steps = explain(*the_probe(vendor_dialect, queues))
    if connection.vendor == "postgresql":
        explained = steps[0]["QUERY PLAN"]
        (plan,) = json.loads(explained) if isinstance(explained, str) else explained
        assert table not in set(scanned_tables(plan["Plan"]))
    elif connection.vendor == "sqlite":
        details = [step["detail"] for step in steps]
        assert f"SCAN {table}" not in details, details
        assert any("leasejobs_limited" in detail for detail in details), details
    else:  # MySQL: one row per table read, "ALL" for a full scan
        assert steps
        for step in steps:
            assert step["type"] != "ALL", step
            assert "filesort" not in (step["Extra"] or ""), step
