"""MySQL/MariaDB quirks that the lease protocol depends on, each checked on the real server."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mysql_only() -> None:
    if connection.vendor != "mysql":
        pytest.skip("a MySQL/MariaDB behaviour")


@pytest.fixture
def session_time_zone_plus_five(mysql_only: None) -> Iterator[None]:
    """Reconnect as if the server's default time zone were UTC+5 (``time_zone`` = SYSTEM)."""
    options = connection.settings_dict.setdefault("OPTIONS", {})
    saved = dict(options)
    options["init_command"] = "SET time_zone = '+05:00'"
    connection.close()
    try:
        yield
    finally:
        options.clear()
        options.update(saved)
        connection.close()


def test_an_update_that_matches_but_changes_nothing_counts_as_one_row(mysql_only: None) -> None:
    """Django connects with CLIENT.FOUND_ROWS: row counts are rows matched, not rows changed.

    Without it, a guarded UPDATE that writes the values a row already has would report 0 and be
    taken for a stale token (Oban #1250: MySQL affected-row counts made every node leader).
    """
    job = jobs.noop.enqueue()
    assert Job.objects.filter(pk=job.pk).update(status=F("status"), attempt=F("attempt")) == 1


def test_claims_use_read_committed(mysql_only: None) -> None:
    """Racing dedupe and replay re-read rows another transaction just committed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@SESSION.tx_isolation")
        assert cursor.fetchone()[0] == "READ-COMMITTED"


def test_a_server_outside_utc_still_runs_no_job_before_its_run_at(
    session_time_zone_plus_five: None,
) -> None:
    """Django stores UTC in naive DATETIME columns, and NOW() follows the session time zone.

    The app sets every MySQL session to UTC, so the database clock and the stored times agree:
    a job given ``run_at`` an hour from now is not claimed four hours early, and a job's
    timestamps written by the database (``created_at``) read back as the real time.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), CURRENT_TIMESTAMP(6))")
        assert cursor.fetchone()[0] == 0
    later = jobs.noop.enqueue(run_at=timezone.now() + dt.timedelta(hours=1))
    now = jobs.noop.enqueue()
    assert [job.pk for job in protocol.claim("w", batch=10)] == [now.pk]
    assert Job.objects.get(pk=later.pk).status == "pending"
    assert abs(Job.objects.get(pk=now.pk).created_at - timezone.now()) < dt.timedelta(hours=1)


def test_bulk_enqueue_returns_ids(mysql_only: None) -> None:
    """MariaDB 10.5+ returns ids from a multi-row INSERT (RETURNING); MySQL 8 cannot."""
    created = jobs.noop.enqueue_many([((), {})] * 3)
    assert all(job.pk for job in created)
    assert Job.objects.count() == 3


def test_bulk_enqueue_without_returning_ids_inserts_row_by_row(monkeypatch) -> None:
    """MySQL 8's path, forced on this database: the ids and database defaults are still read."""
    monkeypatch.setattr(
        type(connection.features), "can_return_rows_from_bulk_insert", False, raising=False
    )
    created = jobs.add.enqueue_many([((1, 2), {}), ((3, 4), {})])
    assert [job.args for job in created] == [[1, 2], [3, 4]]
    assert [Job.objects.get(pk=job.pk).args for job in created] == [[1, 2], [3, 4]]
    assert all(job.created_at is not None for job in created)
