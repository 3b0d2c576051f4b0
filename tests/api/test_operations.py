"""Dead letters, schedules and their occurrences, queue stats and the health verdict."""

from __future__ import annotations

import datetime as dt
import json

import jsonschema_rs  # schemathesis brings it: the fuzz test validates with it too
import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.api import schema
from django_leasejobs.models import DeadLetter, Job, Schedule
from django_leasejobs.protocol import Failure

from ..conftest import shifted, worker_row


@pytest.fixture
def dead(db, make_due):
    def make(*args) -> DeadLetter:
        job = jobs.add.enqueue(*(args or (1, 2)), max_attempts=1)
        make_due(job)
        claimed = protocol.claim("api-test", batch=1)
        protocol.fail(job.pk, claimed[0].attempt, Failure("boom", "Traceback: boom"))
        return DeadLetter.objects.get(job=job)

    return make


def test_dead_letters_list_and_get(operator, dead):
    first, second = dead(1, 1), dead(2, 2)
    status, body = operator.get("dead-letters/")
    assert status == 200
    assert [r["id"] for r in body["results"]] == [second.pk, first.pk]
    status, body = operator.get(f"dead-letters/{first.pk}/")
    assert status == 200
    assert body["args"] == [1, 1]
    assert body["errors"][0]["error"] == "boom"
    assert body["replayed_job_id"] is None
    assert operator.get("dead-letters/424242/")[0] == 404


@pytest.mark.parametrize(
    ("params", "field"),
    [
        # No name holds a NUL, and PostgreSQL's driver cannot even send one (a 500 before).
        ({"name": "\x00q"}, "name"),
        ({"queue": "\x00"}, "queue"),
        ({"replayed": "\x00"}, "replayed"),
        ({"limit": "9" * 4301}, "limit"),  # int() refuses more than 4,300 digits
    ],
)
def test_dead_letter_list_refuses_bad_parameters(operator, dead, params, field):
    dead(1, 1)
    status, body = operator.get("dead-letters/", **params)
    assert (status, body["code"], body["field"]) == (400, "invalid_parameter", field)


@pytest.mark.parametrize(
    "path",
    [
        "dead-letters/99999999999999999999999/",
        f"dead-letters/{'9' * 4301}/",
        "schedules/99999999999999999999999/occurrences/",
        f"schedules/{'9' * 4301}/occurrences/",
    ],
)
def test_ids_past_any_key_are_not_found(operator, path):
    status, body = operator.get(path, start="2030-01-01T00:00:00Z", end="2030-01-02T00:00:00Z")
    assert (status, body["code"]) == (404, "not_found")


def test_replay_as_is_then_refused_twice(operator, dead):
    letter = dead(1, 2)
    status, body = operator.post(f"dead-letters/{letter.pk}/replay/")
    assert status == 201
    assert body["args"] == [1, 2]
    assert body["status"] == "pending"
    letter.refresh_from_db()
    assert letter.replayed_job_id == body["id"]
    assert LogEntry.objects.filter(object_id=str(body["id"]), action_flag=ADDITION).exists()
    status, again = operator.post(f"dead-letters/{letter.pk}/replay/")
    assert (status, again["code"]) == (409, "already_replayed")
    assert Job.objects.count() == 2
    replayed = operator.get("dead-letters/", replayed="true")[1]["results"]
    assert [r["id"] for r in replayed] == [letter.pk]
    assert operator.get("dead-letters/", replayed="false")[1]["results"] == []


def test_replay_with_edited_arguments(operator, dead):
    letter = dead(1, 2)
    status, body = operator.post(
        f"dead-letters/{letter.pk}/replay/", {"args": [5, 6], "kwargs": {}}
    )
    assert status == 201
    assert body["args"] == [5, 6]


@pytest.mark.parametrize(
    ("edits", "field", "problem"),
    [
        ({"args": [5, 6, 7]}, "args", "too many positional arguments"),
        ({"args": [5]}, "args", "missing a required argument: 'b'"),
        ({"args": [5, 6], "kwargs": {"c": 1}}, "kwargs", "got an unexpected keyword argument 'c'"),
    ],
)
def test_replay_with_arguments_the_job_cannot_take_is_400(operator, dead, edits, field, problem):
    letter = dead(1, 2)
    status, body = operator.post(f"dead-letters/{letter.pk}/replay/", edits)
    assert (status, body["code"], body["field"]) == (400, "invalid", field)
    assert body["message"] == (
        f"Job 'testapp.jobs.add' cannot take these arguments: {problem} (its signature: add(a, b))."
    )
    letter.refresh_from_db()
    assert letter.replayed_job_id is None
    assert Job.objects.count() == 1


def test_replay_with_edited_arguments_keeps_to_the_allow_list(operator, db, make_due):
    """A job the API does not expose is replayed as it was, never with new arguments."""
    job = jobs.permanent.enqueue(max_attempts=1)
    make_due(job)
    claimed = protocol.claim("api-test", batch=1)
    protocol.fail(job.pk, claimed[0].attempt, Failure("boom", "Traceback: boom"))
    letter = DeadLetter.objects.get(job=job)
    status, body = operator.post(f"dead-letters/{letter.pk}/replay/", {"args": [], "kwargs": {}})
    assert (status, body["code"]) == (403, "permission_denied")
    assert "allow-list" in body["message"]
    letter.refresh_from_db()
    assert letter.replayed_job_id is None
    assert Job.objects.count() == 1
    status, body = operator.post(f"dead-letters/{letter.pk}/replay/")
    assert status == 201
    assert body["name"] == "testapp.jobs.permanent"


@pytest.mark.parametrize(
    ("edits", "field"),
    [
        ({"args": "x"}, "args"),
        ({"kwargs": [1]}, "kwargs"),
        ({"args": ["\u0000"]}, "args"),
        ({"args": ["\ud800"]}, "args"),
        ({"kwargs": {"\udfff": 1}}, "kwargs"),
    ],
)
def test_replay_with_bad_arguments_writes_nothing(operator, dead, edits, field):
    letter = dead(1, 2)
    status, body = operator.post(f"dead-letters/{letter.pk}/replay/", edits)
    assert (status, body["code"], body["field"]) == (400, "invalid", field)
    letter.refresh_from_db()
    assert letter.replayed_job_id is None
    assert Job.objects.count() == 1
    status, body = operator.post(f"dead-letters/{letter.pk}/replay/", {"color": 1})
    assert (status, body["code"]) == (400, "unknown_field")


def test_schedules_and_occurrences(operator):
    schedule = Schedule.objects.create(name="hourly", cron="0 * * * *", job="testapp.jobs.noop")
    Schedule.objects.filter(pk=schedule.pk).update(created_at=shifted(-7 * 86400))
    status, body = operator.get("schedules/")
    assert status == 200
    assert body["results"][0]["name"] == "hourly"
    start = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    emitted = jobs.noop.enqueue()
    Job.objects.filter(pk=emitted.pk).update(
        schedule=schedule, occurrence_at=start + dt.timedelta(hours=1)
    )
    params = {"start": "2030-01-01T00:00:00Z", "end": "2030-01-01T05:00:00Z", "limit": 3}
    status, body = operator.get(f"schedules/{schedule.pk}/occurrences/", **params)
    assert status == 200
    assert [r["at"] for r in body["results"]] == [
        "2030-01-01T01:00:00Z",
        "2030-01-01T02:00:00Z",
        "2030-01-01T03:00:00Z",
    ]
    assert body["results"][0]["state"] == "emitted"
    assert body["results"][0]["job_id"] == emitted.pk
    assert body["results"][1]["state"] == "upcoming"
    assert body["next_start"] == "2030-01-01T03:00:00Z"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"end": "2030-01-02T00:00:00Z"}, "start"),
        ({"start": "2030-01-02T00:00:00Z"}, "end"),
        ({"start": "soon", "end": "2030-01-02T00:00:00Z"}, "start"),
        ({"start": "2030-01-01T00:00:00", "end": "2030-01-02T00:00:00Z"}, "start"),
        ({"start": "2030-01-02T00:00:00Z", "end": "2030-01-01T00:00:00Z"}, "end"),
        ({"start": "2030-01-01T00:00:00Z", "end": "2030-03-01T00:00:00Z"}, "end"),
        # Instants that Python's calendar cannot carry into UTC (year 0, year 10000).
        ({"start": "0001-01-01T00:00:00+14:00", "end": "0001-01-02T00:00:00Z"}, "start"),
        ({"start": "9999-12-31T00:00:00Z", "end": "9999-12-31T23:59:59-12:00"}, "end"),
        ({"start": "0001-01-01T00:00:00+14:00", "end": "9999-12-31T23:59:59-12:00"}, "end"),
        (
            {"start": "9999-12-31T00:00:00Z", "end": "9999-12-31T23:59:59Z", "limit": "9" * 4301},
            "limit",
        ),
    ],
)
def test_occurrence_range_is_checked(operator, params, field):
    schedule = Schedule.objects.create(name="hourly", cron="0 * * * *", job="testapp.jobs.noop")
    status, body = operator.get(f"schedules/{schedule.pk}/occurrences/", **params)
    assert (status, body["field"]) == (400, field)


def test_occurrences_at_the_ends_of_the_calendar(operator):
    hourly = Schedule.objects.create(name="hourly", cron="0 * * * *", job="testapp.jobs.noop")
    path = f"schedules/{hourly.pk}/occurrences/"
    # The last days Python counts: start + 31 days and the occurrence after the end overflow.
    status, body = operator.get(path, start="9999-12-30T00:00:00Z", end="9999-12-31T23:59:59Z")
    assert status == 200
    assert len(body["results"]) == 47
    assert body["results"][-1]["at"] == "9999-12-31T23:00:00Z"
    assert body["next_start"] is None
    status, body = operator.get(path, start="0001-01-01T00:00:00Z", end="0001-01-01T03:00:00Z")
    assert status == 200
    assert [r["at"] for r in body["results"]] == [
        "0001-01-01T01:00:00Z",
        "0001-01-01T02:00:00Z",
        "0001-01-01T03:00:00Z",
    ]
    # An end Python reads in UTC but not in the schedule's timezone (Tokyo: year 10000).
    tokyo = Schedule.objects.create(
        name="tokyo", cron="0 * * * *", timezone="Asia/Tokyo", job="testapp.jobs.noop"
    )
    status, body = operator.get(
        f"schedules/{tokyo.pk}/occurrences/",
        start="9999-12-31T00:00:00Z",
        end="9999-12-31T20:00:00Z",
    )
    assert (status, body["code"], body["field"]) == (400, "invalid_parameter", "end")
    assert "Asia/Tokyo" in body["message"]


def test_queue_stats(operator, make_due):
    job = jobs.add.enqueue(1, 2, queue="mail")
    make_due(job, seconds_ago=60)
    status, body = operator.get("queues/")
    assert status == 200
    assert body["queues"]["mail"]["due"] == 1
    assert body["total"]["oldest_due_age"] >= 59


def test_health_verdict(operator, make_due, settings):
    assert operator.get("health/")[1]["status"] == "ok"
    settings.LEASEJOBS_HEALTH_MAX_DUE_AGE = 30
    job = jobs.add.enqueue(1, 2)
    make_due(job, seconds_ago=120)
    status, body = operator.get("health/")
    assert (status, body["status"]) == (503, "unhealthy")
    assert body["problems"][0]["metric"] == "oldest_due_age"


def test_health_names_a_queue_with_due_jobs_no_live_worker_serves(operator, make_due):
    make_due(jobs.add.enqueue(1, 2, queue="reports"), seconds_ago=120)
    worker_row("live-a")  # serves default and mail
    status, body = operator.get("health/")
    assert (status, body["status"]) == (503, "unhealthy")
    assert [(p["queue"], p["metric"]) for p in body["problems"]] == [("reports", "unserved")]
    assert body["thresholds"]["max_unserved_age"] == 60
    worker_row("live-b", queues="reports")
    assert operator.get("health/")[0] == 200


@pytest.mark.parametrize(("path", "component"), [("queues/", "Stats"), ("health/", "Health")])
def test_stats_and_health_list_the_workers_as_documented(operator, path, component):
    worker_row("live-a", stuck=1, running=2)
    worker_row("lost-b", seconds_ago=600, stuck=4)
    status, body = operator.get(path)
    assert status == 200
    assert [(w["worker_id"], w["stuck"], w["lost"]) for w in body["workers"]] == [
        ("live-a", 1, False),
        ("lost-b", 4, True),
    ]
    assert body["stuck"] == 1
    document = json.loads(schema.rendered())
    checker = {**document, "$ref": f"#/components/schemas/{component}"}
    jsonschema_rs.Draft202012Validator(checker, validate_formats=True).validate(body)
