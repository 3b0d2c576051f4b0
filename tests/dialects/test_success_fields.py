"""What a success writes is spelled once (``tokens.SUCCEEDED``): the ORM's dictionary and the
SQL of every statement that completes jobs are made from it, and write the same row."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, transaction
from testapp import jobs
from testapp import workflow_jobs as w

from django_leasejobs import dialects, group, protocol
from django_leasejobs.dialects.postgresql import dialect as postgresql
from django_leasejobs.dialects.postgresql import sql as postgresql_sql
from django_leasejobs.dialects.postgresql import steps as postgresql_steps
from django_leasejobs.dialects.tokens import SUCCEEDED, succeeded_fields, succeeded_sql
from django_leasejobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

WRITTEN = [name for name in SUCCEEDED if name != "finished_at"]


def _row(job_id: int) -> dict[str, Any]:
    return Job.objects.filter(pk=job_id).values(*SUCCEEDED).get()


def test_the_sql_and_the_dictionary_name_the_same_columns() -> None:
    columns = {f.column for f in Job._meta.concrete_fields}
    assert set(SUCCEEDED) <= columns
    assert set(succeeded_fields(None, "w")) == set(SUCCEEDED)
    clause = succeeded_sql("NOW()", "%(result)s")
    assert [part.split(" = ")[0] for part in clause.split(", ")] == list(SUCCEEDED)
    for statement in (
        postgresql.COMPLETE_MANY,
        postgresql.COMPLETE_MANY_ANNOUNCED,
        postgresql_steps.COMPLETE_STEPS,
        postgresql_steps.COMPLETE_STEPS_ANNOUNCED,
    ):
        assert postgresql_sql.SUCCEEDED_SET in statement


@pytest.mark.parametrize("result", [None, {"answer": [1, 2]}])
def test_every_statement_writes_what_the_dictionary_writes(
    dialect: dialects.Dialect, result: Any
) -> None:
    """One plain job by the ORM's dictionary, one by the dialect's statement, one workflow job
    by the steps' statement: the same values in every column a success writes."""
    by_orm, by_statement = jobs.noop.enqueue(), jobs.noop.enqueue()
    group(w.square.s(1), w.square.s(2)).enqueue()
    claimed = {job.pk: job for job in protocol.claim("w1", batch=10)}
    step_job = next(pk for pk, job in claimed.items() if job.name == w.square.name)
    Job.objects.filter(pk=by_orm.pk, attempt=1).update(**succeeded_fields(result, "w1"))
    done = dialect.complete_many(
        DEFAULT_DB_ALIAS, [dialects.Completion(by_statement.pk, 1, result)], "w1"
    )
    assert done.jobs == {by_statement.pk}
    with transaction.atomic():
        moved = dialect.complete_steps(
            DEFAULT_DB_ALIAS, [dialects.Completion(step_job, 1, result)], "w1"
        )
    assert moved.jobs == {step_job}
    expected = _row(by_orm.pk)
    assert expected["result"] == result
    for job_id in (by_statement.pk, step_job):
        row = _row(job_id)
        assert {k: row[k] for k in WRITTEN} == {k: expected[k] for k in WRITTEN}
        assert row["finished_at"] is not None
