"""``waiting.oldest_due``: every waiting queue and its oldest due job in one statement, on
every database, and its plan: index probes, never a read of the whole table."""

from __future__ import annotations

import json

import pytest
from django.db import DEFAULT_DB_ALIAS, connection
from testapp import jobs

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.dialects import waiting
from django_leasejobs.models import Job, Status

from ..conftest import shifted
from ..plans import explain, scanned_tables, statements

pytestmark = pytest.mark.django_db


def test_each_waiting_queue_with_its_oldest_due_job() -> None:
    old = jobs.noop.enqueue(queue="b")
    Job.objects.filter(pk=old.pk).update(run_at=shifted(-60))
    jobs.noop.enqueue(queue="b")
    retried = jobs.noop.enqueue(queue="a")
    Job.objects.filter(pk=retried.pk).update(status=Status.FAILED, run_at=shifted(-120))
    jobs.noop.enqueue(queue="later", delay=3600)
    for status in (Status.RUNNING, Status.SUCCEEDED):
        Job.objects.filter(pk=jobs.noop.enqueue(queue=f"not-{status}").pk).update(status=status)

    now = db_now()
    with statements() as sent:
        found = waiting.oldest_due(DEFAULT_DB_ALIAS, now)
    assert len(sent) == 1
    assert list(found) == ["a", "b", "later"]
    assert found["later"] is None
    old.refresh_from_db()
    retried.refresh_from_db()
    assert (found["a"], found["b"]) == (retried.run_at, old.run_at)


def test_paused_job_names_are_not_due() -> None:
    held = jobs.noop.enqueue(queue="q")
    Job.objects.filter(pk=held.pk).update(run_at=shifted(-60))
    other = jobs.add.enqueue(1, 2, queue="q")
    other.refresh_from_db()
    found = waiting.oldest_due(DEFAULT_DB_ALIAS, db_now(), {jobs.noop.name, "x.y"})
    assert found == {"q": other.run_at}
    assert waiting.oldest_due(DEFAULT_DB_ALIAS, db_now(), {jobs.noop.name, jobs.add.name}) == {
        "q": None
    }


def test_no_waiting_job_no_queue() -> None:
    Job.objects.filter(pk=jobs.noop.enqueue().pk).update(status=Status.SUCCEEDED)
    assert waiting.oldest_due(DEFAULT_DB_ALIAS, db_now()) == {}


def test_the_statement_reads_indexes_not_the_table() -> None:
    """Finished rows ahead of a few waiting ones in few queues: probes, never a table scan."""
    if connection.vendor == "mysql":
        pytest.skip(
            "MySQL/MariaDB have no partial index of waiting rows (leasejobs_waiting is not "
            "built there): their optimizer chooses between the claim index and a scan"
        )
    made = jobs.noop.enqueue_many([{"args": [], "queue": f"q{n % 3}"} for n in range(2000)])
    table = Job._meta.db_table
    if connection.vendor != "mysql":  # MySQL's ANALYZE TABLE commits the test's transaction
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
    Job.objects.filter(pk__lte=made[1990].pk).update(status=Status.SUCCEEDED)
    now = db_now()
    with statements() as sent:
        waiting.oldest_due(DEFAULT_DB_ALIAS, now)
    steps = explain(*sent[0])
    if connection.vendor == "postgresql":
        explained = steps[0]["QUERY PLAN"]
        (plan,) = json.loads(explained) if isinstance(explained, str) else explained
        assert table not in set(scanned_tables(plan["Plan"]))
    else:
        details = [step["detail"] for step in steps]
        assert f"SCAN {table}" not in details, details
