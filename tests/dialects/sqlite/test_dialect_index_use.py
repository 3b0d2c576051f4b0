"""SQLite reads the library's periodic statements through its partial indexes, not the table.

SQLite uses a partial index only for a statement that repeats the index's condition with the
same constants; the ORM binds ``status__in=...`` as parameters, so each of these read every
row of the job table until the filters were written as the conditions are
(``models.IS_WAITING``, ``IS_RUNNING``, ``IS_FINAL``). At 200,000 rows stats.collect() took
152 ms and a dashboard sample 179 ms that way (docs/benchmarks.md). The plans are read with the
parameters each statement was sent with.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from django.db import connection
from testapp import jobs

from django_leasejobs import protocol, stats
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Status
from django_leasejobs.reports import samples

from ...conftest import shifted
from ...plans import sqlite_steps, statements

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's partial-index rule"),
]

TABLE_SCAN = f"SCAN {Job._meta.db_table}"


@pytest.fixture
def busy_table() -> None:
    """Waiting, running and finished jobs, with and without limits, some of them due."""
    jobs.noop.enqueue_many([{"delay": 60} for _ in range(200)])
    jobs.per_customer.enqueue_many([{"args": [n], "delay": 60} for n in range(200)])
    Job.objects.filter(pk__in=Job.objects.order_by("pk").values("pk")[:100]).update(
        status=Status.SUCCEEDED, finished_at=shifted(-30), started_at=shifted(-31)
    )
    Job.objects.filter(status=Status.PENDING).update(run_at=shifted(-1))
    protocol.claim("w", queues=["default"], batch=20)


def minute_sample() -> None:
    samples.sample_minute(db_now().replace(second=0, microsecond=0) - dt.timedelta(minutes=1))


@pytest.mark.parametrize(
    ("read", "indexes"),
    [
        (stats.collect, {"leasejobs_waiting", "leasejobs_running_lease"}),
        (minute_sample, {"leasejobs_waiting", "leasejobs_finished"}),
        (lambda: protocol.claim("w", queues=["default"], batch=10), {"leasejobs_limited"}),
    ],
    ids=["stats.collect", "dashboard sample", "limited claim"],
)
def test_reads_go_through_the_partial_indexes(
    busy_table: None, read: Callable[[], object], indexes: set[str]
) -> None:
    with statements() as sent:
        read()
    steps = sqlite_steps(sent)
    assert TABLE_SCAN not in steps, steps
    for index in indexes:
        assert any(index in step for step in steps), (index, steps)


def test_limited_claim_reads_both_kinds_through_their_indexes(busy_table: None) -> None:
    # Candidates with limits and heads without, read before the claim's transaction.
    with statements() as sent:
        assert len(protocol.claim("w", queues=["default"], batch=10)) == 10
    steps = sqlite_steps(sent)
    assert TABLE_SCAN not in steps, steps
    assert any("leasejobs_limited" in step for step in steps), steps
    assert any("leasejobs_claimable" in step for step in steps), steps
