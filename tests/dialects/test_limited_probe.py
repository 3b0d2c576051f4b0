"""``limited_due``: the probe every claim sends first, on every dialect; on PostgreSQL, its plan
reads the index of jobs with limits and never the whole table.

A drain of jobs with limits leaves claimed and finished rows ahead of the waiting ones. A probe
planned as a sequential scan read past all of them on every claim (found by timing a drain
statement by statement, docs/benchmarks.md): the plan test fixes the shape, not a duration.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection
from django.test.utils import CaptureQueriesContext
from testapp import jobs

from django_leasejobs import dialects
from django_leasejobs.models import Job, Status

from ..conftest import shifted

pytestmark = pytest.mark.django_db


@pytest.fixture
def dialect() -> dialects.Dialect:
    return dialects.for_alias(DEFAULT_DB_ALIAS)


def limited(count: int, queue: str = "default") -> list[Job]:
    items = [{"args": [n], "queue": queue, "delay": 60} for n in range(count)]
    return jobs.per_customer.enqueue_many(items)


def make_due(*queues: str) -> None:
    Job.objects.filter(queue__in=queues).update(run_at=shifted(-1))


def test_no_job_with_limits_is_no_probe_hit(dialect: dialects.Dialect) -> None:
    jobs.noop.enqueue()
    make_due("default")
    assert dialect.limited_due(DEFAULT_DB_ALIAS, None) is False
    assert dialect.limited_due(DEFAULT_DB_ALIAS, ["default"]) is False


def test_a_due_job_with_limits_is_found_in_its_queue_only(dialect: dialects.Dialect) -> None:
    limited(1, queue="b")
    assert dialect.limited_due(DEFAULT_DB_ALIAS, None) is False  # not due yet
    make_due("b")
    assert dialect.limited_due(DEFAULT_DB_ALIAS, None) is True
    assert dialect.limited_due(DEFAULT_DB_ALIAS, ["b"]) is True
    assert dialect.limited_due(DEFAULT_DB_ALIAS, ["a", "b"]) is True
    assert dialect.limited_due(DEFAULT_DB_ALIAS, ["a"]) is False


def test_running_and_finished_jobs_with_limits_are_not_due(dialect: dialects.Dialect) -> None:
    running, done = limited(2)
    make_due("default")
    Job.objects.filter(pk=running.pk).update(status=Status.RUNNING)
    Job.objects.filter(pk=done.pk).update(status=Status.SUCCEEDED)
    assert dialect.limited_due(DEFAULT_DB_ALIAS, None) is False
    assert dialect.limited_due(DEFAULT_DB_ALIAS, ["default"]) is False
    Job.objects.filter(pk=running.pk).update(status=Status.FAILED)  # waiting for its retry
    assert dialect.limited_due(DEFAULT_DB_ALIAS, ["default"]) is True


def scanned_tables(plan: dict[str, Any]) -> Iterator[str]:
    """The relations a plan reads with a sequential scan."""
    if plan["Node Type"] == "Seq Scan":
        yield plan["Relation Name"]
    for child in plan.get("Plans", []):
        yield from scanned_tables(child)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner")
@pytest.mark.parametrize("queues", [None, ["default"], ["default", "other"]])
def test_probe_reads_the_index_when_most_rows_have_limits(
    dialect: dialects.Dialect, queues: list[str] | None
) -> None:
    # The drain's state: statistics taken when every row was a due job with limits, then the
    # first half claimed and finished (their rows now lie ahead of the waiting ones).
    made = limited(2000)
    make_due("default")
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(Job._meta.db_table)}")
    Job.objects.filter(pk__lte=made[999].pk).update(status=Status.SUCCEEDED)
    with CaptureQueriesContext(connection) as sent:
        assert dialect.limited_due(DEFAULT_DB_ALIAS, queues) is True
    (probe,) = sent.captured_queries
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + probe["sql"])
        explained = cursor.fetchone()[0]
    (plan,) = json.loads(explained) if isinstance(explained, str) else explained
    assert Job._meta.db_table not in set(scanned_tables(plan["Plan"]))
