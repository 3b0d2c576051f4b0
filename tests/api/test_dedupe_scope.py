"""Dedupe keys over HTTP: a caller who may enqueue one exposed job reaches no other job
through a key, never sets the dedupe options, and sees a holder only with ``view_job``."""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs.models import Job, Status

from .conftest import Caller, make_user

pytestmark = pytest.mark.django_db

FAR = "9999-01-01T00:00:00Z"


@pytest.fixture
def enqueuer() -> Caller:
    """May enqueue the allow-listed jobs and nothing else: no view_job."""
    from django_leasejobs.upkeep import api_tokens as tokens

    user = make_user("enqueuer", ["add_job"])
    return Caller(user, tokens.issue(user)[1])


@pytest.mark.parametrize(
    "option", [{"on_conflict": "replace"}, {"dedupe_states": ["succeeded"]}, {"dedupe_period": 60}]
)
def test_the_dedupe_options_are_not_a_callers(enqueuer, option):
    status, body = enqueuer.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "dedupe_key": "k", **option}
    )
    assert status == 400
    assert body["code"] == "unknown_field"
    assert body["field"] == next(iter(option))
    assert not Job.objects.exists()


def test_a_pending_job_of_another_name_is_not_rewritten_nor_postponed(enqueuer):
    victim = jobs.permanent.enqueue(dedupe_key="victim")
    status, body = enqueuer.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [6, 6], "dedupe_key": "victim", "run_at": FAR}
    )
    assert status == 201
    assert body["id"] != victim.pk
    assert body["name"] == "testapp.jobs.add"
    victim.refresh_from_db()
    assert (victim.args, victim.status) == ([], Status.PENDING)
    assert victim.run_at.year < 9999


def test_a_finished_jobs_result_is_not_read_through_a_key(enqueuer):
    finished = jobs.daily_report.enqueue("2026-01-01")
    Job.objects.filter(pk=finished.pk).update(
        status=Status.SUCCEEDED, live_dedupe_key=None, result={"revenue": 12345}
    )
    status, body = enqueuer.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "dedupe_key": "report:2026-01-01"}
    )
    assert status == 201
    assert body["id"] != finished.pk
    assert "12345" not in enqueuer.last.content.decode()


def test_a_squatted_key_does_not_stop_a_trusted_producers_job(enqueuer):
    status, body = enqueuer.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "dedupe_key": "report:2026-01-02"}
    )
    assert status == 201
    report = jobs.daily_report.enqueue("2026-01-02")
    assert report.pk != body["id"]
    assert report.name == "testapp.jobs.daily_report"


def test_a_hit_without_view_job_shows_no_row(enqueuer):
    holder = jobs.add.enqueue(40, 2, dedupe_key="mine")
    status, body = enqueuer.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "dedupe_key": "mine"}
    )
    assert status == 409
    assert body["code"] == "duplicate"
    assert body["field"] == "dedupe_key"
    assert "40" not in enqueuer.last.content.decode()
    assert Job.objects.get().pk == holder.pk


def test_a_batch_with_a_hit_without_view_job_enqueues_nothing(enqueuer):
    jobs.add.enqueue(40, 2, dedupe_key="mine")
    status, body = enqueuer.post(
        "jobs/batch/",
        {
            "jobs": [
                {"name": "testapp.jobs.add", "args": [1, 1]},
                {"name": "testapp.jobs.add", "args": [1, 2], "dedupe_key": "mine"},
            ]
        },
    )
    assert status == 409
    assert (body["code"], body["field"]) == ("duplicate", "jobs[1].dedupe_key")
    assert Job.objects.count() == 1


def test_a_hit_with_view_job_returns_the_holder(operator):
    holder = jobs.add.enqueue(40, 2, dedupe_key="mine")
    status, body = operator.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "dedupe_key": "mine"}
    )
    assert status == 200
    assert body["id"] == holder.pk
    assert operator.last["LeaseJobs-Deduplicated"] == "true"


def test_a_batch_reports_hits_of_a_keyed_job(operator, settings):
    """A job whose ``@job`` makes the key: each batch item says whether it was a hit."""
    settings.LEASEJOBS_API_JOBS = ["testapp.jobs.sync_user"]
    first = jobs.sync_user.enqueue(1)
    status, body = operator.post(
        "jobs/batch/",
        {"jobs": [{"name": "testapp.jobs.sync_user", "args": [n]} for n in (1, 2)]},
    )
    assert status == 201
    assert [item["deduplicated"] for item in body["jobs"]] == [True, False]
    assert body["jobs"][0]["job"]["id"] == first.pk
