"""Progress reports: validated, written by one UPDATE fenced by the attempt, at database time."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.errors import JobArgumentsError, JobValidationError
from django_leasejobs.models import Job, Status
from django_leasejobs.protocol import progress_update
from django_leasejobs.protocol.progress import MESSAGE_MAX

from ..conftest import fields, shifted

pytestmark = pytest.mark.django_db


def running_job() -> Job:
    jobs.noop.enqueue()
    (job,) = protocol.claim("w1", batch=1)
    return job


def test_a_report_is_stored_with_the_database_time() -> None:
    job = running_job()
    before = db_now()
    assert protocol.record_progress(job.pk, job.attempt, progress_update(3, 10, "rows")) is True
    progress = Job.objects.get(pk=job.pk).progress
    assert {k: progress[k] for k in ("done", "total", "message")} == {
        "done": 3,
        "total": 10,
        "message": "rows",
    }
    assert isinstance(progress["done"], int)  # stored as given: 3, not 3.0
    at = dt.datetime.fromisoformat(progress["at"])
    assert at.utcoffset() == dt.timedelta(0)
    assert before - dt.timedelta(seconds=1) <= at <= db_now() + dt.timedelta(seconds=1)


def test_a_report_is_one_update_fenced_by_id_attempt_and_running() -> None:
    job = running_job()
    with CaptureQueriesContext(connection) as queries:
        protocol.record_progress(job.pk, job.attempt, progress_update(1))
    (query,) = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert query.upper().startswith("UPDATE")
    assert "rows" not in query  # values travel as parameters


def test_fractions_and_an_unknown_total() -> None:
    job = running_job()
    protocol.record_progress(job.pk, job.attempt, progress_update(0.25))
    progress = Job.objects.get(pk=job.pk).progress
    assert progress["done"] == 0.25
    assert progress["total"] is None
    assert progress["message"] == ""


def test_a_stale_attempt_changes_nothing() -> None:
    job = running_job()
    protocol.record_progress(job.pk, job.attempt, progress_update(1, 10))
    first = Job.objects.get(pk=job.pk).progress
    Job.objects.filter(pk=job.pk).update(attempt=job.attempt + 1)  # another worker took it over
    assert protocol.record_progress(job.pk, job.attempt, progress_update(9, 10)) is False
    assert Job.objects.get(pk=job.pk).progress == first


def test_an_ended_attempt_changes_nothing() -> None:
    job = running_job()
    protocol.complete(job.pk, job.attempt)
    assert protocol.record_progress(job.pk, job.attempt, progress_update(1)) is False
    assert fields(job.pk, "status", "progress") == {"status": Status.SUCCEEDED, "progress": None}


def test_a_new_job_has_no_progress() -> None:
    job = jobs.noop.enqueue()
    assert Job.objects.get(pk=job.pk).progress is None


def test_a_later_report_replaces_the_earlier_one() -> None:
    job = running_job()
    protocol.record_progress(job.pk, job.attempt, progress_update(1, 4, "one"))
    Job.objects.filter(pk=job.pk).update(lease_expires_at=shifted(60))  # unrelated write
    protocol.record_progress(job.pk, job.attempt, progress_update(4, 4, "four"))
    progress = Job.objects.get(pk=job.pk).progress
    assert (progress["done"], progress["total"], progress["message"]) == (4, 4, "four")


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        ((-1,), JobValidationError, "done must be a finite number >= 0"),
        ((float("nan"),), JobValidationError, "done must be a finite number >= 0"),
        ((float("inf"),), JobValidationError, "done must be a finite number >= 0"),
        (("3",), JobArgumentsError, "done must be a number, not str"),
        ((True,), JobArgumentsError, "done must be a number, not bool"),
        ((1, -2), JobValidationError, "total must be a finite number >= 0"),
        ((5, 4), JobValidationError, "total (4) is less than done (5)"),
        ((1, None, 7), JobArgumentsError, "message must be a str, not int"),
        ((1, None, "a\x00b"), JobValidationError, "NUL"),
    ],
)
def test_bad_reports_are_refused_clearly(args: tuple, error: type, words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        progress_update(*args)


def test_a_long_message_is_cut() -> None:
    assert progress_update(1, message="x" * (MESSAGE_MAX + 50)).message == "x" * MESSAGE_MAX
    assert progress_update(2.0, 2).done == 2
    assert isinstance(progress_update(2.0).done, int)
