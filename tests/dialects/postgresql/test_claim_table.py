"""PostgreSQL's claims read the job table's live partition, and the table again once it is gone."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.db import DEFAULT_DB_ALIAS, ProgrammingError, connection, transaction
from testapp import jobs

from django_leasejobs import dialects, protocol
from django_leasejobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

PARENT = re.compile(r"\bdjango_leasejobs_job\b")


@pytest.fixture(autouse=True)
def postgresql() -> Iterator[None]:
    if connection.vendor != "postgresql":
        pytest.skip("the job table is partitioned on PostgreSQL only")
    from django_leasejobs.dialects.postgresql import claim_table

    claim_table.forget()
    yield
    claim_table.forget()


def claimed_with(call: object) -> tuple[list[Job], list[str]]:
    """The jobs a claim took and the statements it sent."""
    sent: list[str] = []

    def capture(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        claimed = call()  # type: ignore[operator]
    return claimed, sent


def unpartitioned_by_another_process() -> None:
    """Migration 0026 undone behind this process's back (it keeps what it read)."""
    from django_leasejobs.dialects.postgresql import history

    with transaction.atomic(), connection.cursor() as cursor:
        history.unpartition_job_table(cursor)


def migration_step(step: str) -> None:
    """One of migration 0026's steps, in its own transaction as the migration runs it."""
    with transaction.atomic():
        dialects.history_migration(connection, step)


def partitioned_again() -> None:
    for step in ("check", "partition"):
        migration_step(step)


@pytest.mark.parametrize("queues", [None, ["default"], ["default", "other"]])
def test_a_claim_and_its_probe_read_the_live_partition(queues: list[str] | None) -> None:
    from django_leasejobs.dialects.postgresql import claim_table

    job = jobs.noop.enqueue()
    assert claim_table.table(DEFAULT_DB_ALIAS) == claim_table.LIVE  # read once, then kept
    claimed, sent = claimed_with(lambda: protocol.claim("w1", queues=queues, batch=10))
    assert [j.pk for j in claimed] == [job.pk]
    assert len(sent) == 2  # the probe for jobs with limits, then the claim
    for sql in sent:
        assert "django_leasejobs_job_live" in sql
        assert not PARENT.search(sql), sql


@pytest.mark.parametrize("queues", [None, ["default"]])
def test_a_claim_of_jobs_with_limits_reads_and_leases_the_live_partition(
    queues: list[str] | None,
) -> None:
    from django_leasejobs.dialects.postgresql import claim_table

    limited = [jobs.limited_both.enqueue(1), jobs.limited_both.enqueue(1)]
    plain = jobs.noop.enqueue()
    assert claim_table.table(DEFAULT_DB_ALIAS) == claim_table.LIVE
    claimed, sent = claimed_with(lambda: protocol.claim("w1", queues=queues, batch=10))
    # One of the customer's two (its limit is 1), and the job without limits beside it.
    assert sorted(j.pk for j in claimed) == [limited[0].pk, plain.pk]
    reads = [sql for sql in sent if "SAVEPOINT" not in sql and "django_leasejobs_job" in sql]
    assert len(reads) >= 4  # the probe, the hold, the limiters' state, the lease
    for sql in reads:
        assert "django_leasejobs_job_live" in sql
        assert not PARENT.search(sql), sql


def test_a_claim_finds_the_partition_gone_and_claims_from_the_table() -> None:
    from django_leasejobs.dialects.postgresql import claim_table

    first, second = jobs.noop.enqueue(), jobs.noop.enqueue()
    assert claim_table.table(DEFAULT_DB_ALIAS) == claim_table.LIVE
    unpartitioned_by_another_process()
    try:
        assert [j.pk for j in protocol.claim("w1", batch=1)] == [first.pk]
        assert claim_table.table(DEFAULT_DB_ALIAS) == "django_leasejobs_job"
    finally:
        partitioned_again()
    assert [j.pk for j in protocol.claim("w1", batch=1)] == [second.pk]


def test_in_a_transaction_a_gone_partition_is_an_error_and_the_next_claim_reads_the_table() -> None:
    from django_leasejobs.dialects.postgresql import claim_table

    job = jobs.noop.enqueue()
    assert claim_table.table(DEFAULT_DB_ALIAS) == claim_table.LIVE
    unpartitioned_by_another_process()
    try:
        with transaction.atomic(), pytest.raises(ProgrammingError):
            protocol.claim("w1", batch=1)
        assert claim_table.table(DEFAULT_DB_ALIAS) == "django_leasejobs_job"
        assert [j.pk for j in protocol.claim("w1", batch=1)] == [job.pk]
    finally:
        partitioned_again()


def test_the_migration_steps_make_the_next_claim_read_the_layout_again() -> None:
    from django_leasejobs.dialects.postgresql import claim_table

    job = jobs.noop.enqueue()
    assert claim_table.table(DEFAULT_DB_ALIAS) == claim_table.LIVE
    migration_step("unpartition")  # forgets what was read: the next claim reads it again
    try:
        claimed, sent = claimed_with(lambda: protocol.claim("w1", batch=1))
        assert [j.pk for j in claimed] == [job.pk]
        assert not any("django_leasejobs_job_live" in sql for sql in sent)
    finally:
        partitioned_again()
    later = jobs.noop.enqueue()
    assert claim_table.table(DEFAULT_DB_ALIAS) == claim_table.LIVE
    claimed, sent = claimed_with(lambda: protocol.claim("w1", batch=1))
    assert [j.pk for j in claimed] == [later.pk]
    assert all("django_leasejobs_job_live" in sql for sql in sent)
