"""Read and act on jobs: list with filters and cursor pages, get with history, cancel, retry."""

from __future__ import annotations

import base64
import json

import jsonschema_rs  # schemathesis brings it: the fuzz test validates with it too
import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.api import schema
from django_leasejobs.db.dbtime import DbNow
from django_leasejobs.models import Job
from django_leasejobs.protocol import Failure


def cursor_of(number: str) -> str:
    """A cursor as the API writes them, around any text."""
    return base64.urlsafe_b64encode(f"before:{number}".encode()).decode().rstrip("=")


def failed(make_due) -> Job:
    job = jobs.add.enqueue(1, 2, max_attempts=3)
    make_due(job)
    claimed = protocol.claim("api-test", batch=1)
    protocol.fail(job.pk, claimed[0].attempt, Failure("boom", "Traceback: boom"))
    return Job.objects.get(pk=job.pk)


def test_get_job_has_its_attempt_history(operator, make_due):
    job = failed(make_due)
    status, body = operator.get(f"jobs/{job.pk}/")
    assert status == 200
    assert body["status"] == "failed"
    assert body["attempt"] == 1
    assert body["max_attempts"] == 3
    assert body["errors"] == job.errors
    assert body["errors"][0]["error"] == "boom"
    assert body["last_error"] == job.last_error


def test_a_job_shows_the_version_its_arguments_are_stored_for(operator):
    old = jobs.add.enqueue(1, 2)
    Job.objects.filter(pk=old.pk).update(version=3)  # as a newer release would have written it
    assert operator.get(f"jobs/{old.pk}/")[1]["version"] == 3
    listed = {row["id"]: row["version"] for row in operator.get("jobs/")[1]["results"]}
    assert listed[old.pk] == 3


def test_a_long_history_is_served_bounded_as_documented(operator, make_due):
    """The kept attempts and the count between them: the Job schema describes both."""
    job = jobs.add.enqueue(1, 2, max_attempts=30)
    for _ in range(30):
        make_due(job)
        claimed = protocol.claim("api-test", batch=1)
        protocol.fail(job.pk, claimed[0].attempt, Failure("E: " + "e" * 20_000, "t" * 50_000))
    status, body = operator.get(f"jobs/{job.pk}/")
    assert status == 200
    assert [e.get("attempt", e) for e in body["errors"]] == [
        1, 2, 3, {"dropped": 7}, *range(11, 31)
    ]  # fmt: skip
    assert all(len(e["error"].encode()) <= 8 * 1024 for e in body["errors"] if "error" in e)
    assert len(body["last_error"].encode()) <= 8 * 1024
    document = json.loads(schema.rendered())
    for component, path in (("Job", f"jobs/{job.pk}/"), ("DeadLetter", "dead-letters/")):
        status, body = operator.get(path)
        assert status == 200
        shown = body if component == "Job" else body["results"][0]
        checker = {**document, "$ref": f"#/components/schemas/{component}"}
        jsonschema_rs.Draft202012Validator(checker, validate_formats=True).validate(shown)
        wrong = {**shown, "errors": [*shown["errors"], {"dropped": 0}]}
        assert not jsonschema_rs.Draft202012Validator(checker).is_valid(wrong)


@pytest.mark.parametrize(
    "path",
    [
        "jobs/999999/",
        "jobs/99999999999999999999999/",
        f"jobs/{'9' * 4301}/",  # more digits than int() reads
        "jobs/x/",
    ],
)
def test_missing_job_is_json_404(operator, path):
    status, body = operator.get(path)
    assert (status, body["code"]) == (404, "not_found")


def test_list_pages_newest_first_with_cursor(operator):
    made = [jobs.add.enqueue(i, i).pk for i in range(7)]
    seen, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        status, body = operator.get("jobs/", **params)
        assert status == 200
        assert len(body["results"]) <= 3
        seen += [row["id"] for row in body["results"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(made, reverse=True)


def test_list_filters(operator, make_due):
    add = jobs.add.enqueue(1, 2)
    noop = jobs.noop.enqueue(queue="other")
    bad = failed(make_due)
    assert [r["id"] for r in operator.get("jobs/", name="testapp.jobs.noop")[1]["results"]] == [
        noop.pk
    ]
    assert [r["id"] for r in operator.get("jobs/", queue="other")[1]["results"]] == [noop.pk]
    assert [r["id"] for r in operator.get("jobs/", status="failed")[1]["results"]] == [bad.pk]
    assert {r["id"] for r in operator.get("jobs/", status="pending")[1]["results"]} == {
        add.pk,
        noop.pk,
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "sleeping"}, "status"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "9" * 4301}, "limit"),  # int() refuses more than 4,300 digits
        ({"limit": "1e400"}, "limit"),
        ({"limit": "\u00b2"}, "limit"),  # a digit to str.isdigit(), not to int()
        ({"cursor": "garbage"}, "cursor"),
        ({"cursor": "YmVmb3JlOi0x"}, "cursor"),
        ({"cursor": cursor_of("9" * 4301)}, "cursor"),
        ({"cursor": cursor_of(str(2**63))}, "cursor"),
        ({"color": "red"}, "color"),
        # No name holds a NUL, and PostgreSQL's driver cannot even send one (a 500 before).
        ({"name": "\x00q"}, "name"),
        ({"queue": "\x00"}, "queue"),
        ({"status": "\x00"}, "status"),
    ],
)
def test_list_refuses_bad_parameters(operator, params, field):
    status, body = operator.get("jobs/", **params)
    assert status == 400
    assert body["field"] == field
    assert body["code"] in ("invalid_parameter", "unknown_parameter")


def test_page_size_settings(operator, settings):
    for i in range(4):
        jobs.add.enqueue(i, i)
    settings.LEASEJOBS_API_PAGE_SIZE = 2
    assert len(operator.get("jobs/")[1]["results"]) == 2
    settings.LEASEJOBS_API_MAX_PAGE_SIZE = 3
    assert operator.get("jobs/", limit=4)[0] == 400


def test_cancel_a_pending_job(operator):
    job = jobs.add.enqueue(1, 2)
    status, body = operator.post(f"jobs/{job.pk}/cancel/")
    assert (status, body["status"]) == (200, "cancelled")
    assert Job.objects.get(pk=job.pk).status == "cancelled"
    entry = LogEntry.objects.get(object_id=str(job.pk), action_flag=CHANGE)
    assert entry.change_message == "Cancelled (API)"
    assert entry.user_id == operator.user.pk
    status, body = operator.post(f"jobs/{job.pk}/cancel/")
    assert (status, body["code"]) == (409, "invalid_state")
    assert (
        body["message"]
        == f"Job #{job.pk} is cancelled: only pending or failed or running jobs can be cancelled."
    )


def test_cancel_a_running_job_asks_its_worker(operator):
    jobs.add.enqueue(1, 2)
    (job,) = protocol.claim("w1", batch=1)
    status, body = operator.post(f"jobs/{job.pk}/cancel/")
    assert (status, body["status"]) == (200, "running")
    assert Job.objects.get(pk=job.pk).cancel_requested_at is not None
    entry = LogEntry.objects.get(object_id=str(job.pk), action_flag=CHANGE)
    assert entry.change_message == "Cancel requested (API)"
    assert protocol.cancel_attempt(job.pk, job.attempt) is protocol.Outcome.CANCELLED


def test_retry_a_failed_job_now(operator, make_due):
    job = failed(make_due)
    status, body = operator.post(f"jobs/{job.pk}/retry/")
    assert status == 200
    assert body["status"] == "failed"
    assert Job.objects.filter(pk=job.pk, status="failed", run_at__lte=DbNow()).exists()
    pending = jobs.add.enqueue(1, 2)
    status, body = operator.post(f"jobs/{pending.pk}/retry/")
    assert (status, body["code"]) == (409, "invalid_state")


def test_actions_refuse_get_and_other_methods(operator):
    job = jobs.add.enqueue(1, 2)
    status, body = operator.get(f"jobs/{job.pk}/cancel/")
    assert (status, body["code"]) == (405, "method_not_allowed")
    assert operator.last["Allow"] == "POST"
    response = operator.client.delete(f"/jobs/api/jobs/{job.pk}/", headers=operator.headers())
    assert response.status_code == 405
    assert Job.objects.get(pk=job.pk).status == "pending"


def test_unknown_paths_are_json_404_for_every_method(operator):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    paths = ("/jobs/api/jobs/null,null/cancel/", "/jobs/api/dead-letters/A%0A/replay/")
    for method in ("get", "post", "put", "delete"):
        for path in paths:  # the second holds a newline: found by the fuzz test
            response = getattr(client, method)(path)
            assert response.status_code == 404, (method, path)
            assert response.json()["code"] == "not_found"


def test_a_job_shows_its_progress_as_the_schema_says(operator):
    from django_leasejobs.protocol import progress_update, record_progress

    quiet = jobs.add.enqueue(1, 2)
    busy = jobs.add.enqueue(3, 4)
    claimed = protocol.claim_job(busy.pk, "api-test", lease_seconds=60)
    record_progress(busy.pk, claimed.attempt, progress_update(3, 8, "copying"))
    document = json.loads(schema.rendered())
    checker = {**document, "$ref": "#/components/schemas/Job"}
    status, body = operator.get(f"jobs/{busy.pk}/")
    assert status == 200
    assert {k: body["progress"][k] for k in ("done", "total", "message")} == {
        "done": 3,
        "total": 8,
        "message": "copying",
    }
    jsonschema_rs.Draft202012Validator(checker, validate_formats=True).validate(body)
    wrong = {**body, "progress": {**body["progress"], "done": -1}}
    assert not jsonschema_rs.Draft202012Validator(checker).is_valid(wrong)
    assert operator.get(f"jobs/{quiet.pk}/")[1]["progress"] is None
    listed = {row["id"]: row["progress"] for row in operator.get("jobs/")[1]["results"]}
    assert listed[quiet.pk] is None
    assert listed[busy.pk]["message"] == "copying"


def test_a_job_s_logs_as_the_schema_says(operator, caller):
    from django_leasejobs.upkeep import AttemptLogs, store_logs

    job = jobs.add.enqueue(1, 2)
    line = {"level": "INFO", "logger": "shop", "message": "hello", "at": "2026-01-01T00:00:00Z"}
    store_logs([AttemptLogs(job.pk, 1, [line, {"dropped": 4}, line], 10)])
    document = json.loads(schema.rendered())
    checker = {**document, "$ref": "#/components/schemas/JobLogs"}
    status, body = operator.get(f"jobs/{job.pk}/logs/")
    assert status == 200
    assert body == {
        "logs": [
            {"attempt": 1, **line},
            {"attempt": 1, "dropped": 4},
            {"attempt": 1, **line},
        ]
    }
    jsonschema_rs.Draft202012Validator(checker, validate_formats=True).validate(body)
    assert operator.get(f"jobs/{jobs.add.enqueue(3, 4).pk}/logs/") == (200, {"logs": []})
    assert operator.get("jobs/999999/logs/")[0] == 404
    status, body = caller("add_job").get(f"jobs/{job.pk}/logs/")
    assert (status, body["code"]) == (403, "permission_denied")
    anonymous = caller()
    anonymous.secret = None
    assert anonymous.get(f"jobs/{job.pk}/logs/")[0] == 401
