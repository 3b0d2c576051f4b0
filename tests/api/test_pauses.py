"""Pause and resume over HTTP: what the claim does afterwards, idempotency, the admin log,
permissions and bad input."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.test import Client, override_settings
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Job, Pause, Status

from .conftest import ALL, make_user

PAUSE = ("view_job", "pause_queue")


def _claimed_ids() -> set[int]:
    return {job.pk for job in protocol.claim("api-test", batch=10)}


def _log_messages() -> list[str]:
    kind = ContentType.objects.get_for_model(Pause)
    return list(
        LogEntry.objects.filter(content_type=kind)
        .order_by("id")
        .values_list("change_message", flat=True)
    )


def test_a_queue_paused_over_http_is_not_claimed_until_resumed(caller, make_due):
    ops = caller(*PAUSE)
    held = jobs.noop.enqueue(queue="mail")
    other = jobs.noop.enqueue(queue="default")
    status, body = ops.post("pauses/", {"kind": "queue", "name": "mail"})
    assert status == 201
    assert (body["kind"], body["name"], body["paused_by"]) == ("queue", "mail", ops.user.username)
    assert body["paused_at"].endswith("Z")
    assert body["age"] >= 0
    make_due(held, other)
    assert _claimed_ids() == {other.pk}
    assert Job.objects.get(pk=held.pk).status == Status.PENDING
    status, body = ops.post("pauses/resume/", {"kind": "queue", "name": "mail"})
    assert (status, body["kind"], body["name"]) == (200, "queue", "mail")
    assert not Pause.objects.exists()
    assert _claimed_ids() == {held.pk}
    assert _log_messages() == ["Paused queue mail (API)", "Resumed queue mail (API)"]


def test_a_job_name_paused_over_http_is_not_claimed_in_any_queue(caller, make_due):
    ops = caller(*PAUSE)
    held = [jobs.noop.enqueue(), jobs.noop.enqueue(queue="mail")]
    runs = jobs.add.enqueue(1, 2)
    assert ops.post("pauses/", {"kind": "job", "name": jobs.noop.name})[0] == 201
    make_due(*held, runs)
    assert _claimed_ids() == {runs.pk}
    assert ops.post("pauses/resume/", {"kind": "job", "name": jobs.noop.name})[0] == 200
    assert _claimed_ids() == {j.pk for j in held}


def test_pausing_twice_answers_the_first_pause_and_logs_once(caller):
    ops = caller(*PAUSE)
    status, first = ops.post("pauses/", {"kind": "queue", "name": "mail"})
    assert status == 201
    status, again = ops.post("pauses/", {"kind": "queue", "name": "mail"})
    assert status == 200
    assert (again["paused_at"], again["paused_by"]) == (first["paused_at"], first["paused_by"])
    assert Pause.objects.count() == 1
    assert _log_messages() == ["Paused queue mail (API)"]


def test_resuming_what_is_not_paused_is_not_paused_and_logs_nothing(caller):
    ops = caller(*PAUSE)
    status, body = ops.post("pauses/resume/", {"kind": "queue", "name": "mail"})
    assert (status, body["code"], body["field"]) == (404, "not_paused", "name")
    assert ops.post("pauses/", {"kind": "queue", "name": "mail"})[0] == 201
    assert ops.post("pauses/resume/", {"kind": "queue", "name": "mail"})[0] == 200
    status, body = ops.post("pauses/resume/", {"kind": "queue", "name": "mail"})
    assert (status, body["code"]) == (404, "not_paused")
    assert _log_messages() == ["Paused queue mail (API)", "Resumed queue mail (API)"]


def test_list_shows_each_pause_with_its_age_and_filters_by_kind(caller):
    ops = caller(*PAUSE)
    protocol.pause(queue="mail", by="alice")
    protocol.pause(job=jobs.noop.name, by="bob")
    Pause.objects.filter(kind="queue").update(
        paused_at=Pause.objects.get(kind="queue").paused_at.replace(year=2020)
    )
    status, body = ops.get("pauses/")
    assert status == 200
    assert [(p["kind"], p["name"], p["paused_by"]) for p in body["results"]] == [
        ("job", jobs.noop.name, "bob"),
        ("queue", "mail", "alice"),
    ]
    ages = {p["kind"]: p["age"] for p in body["results"]}
    assert ages["queue"] > 365 * 86400 > ages["job"] >= 0
    status, body = ops.get("pauses/", kind="queue")
    assert [p["name"] for p in body["results"]] == ["mail"]
    status, body = ops.get("pauses/", kind="cron")
    assert (status, body["code"], body["field"]) == (400, "invalid_parameter", "kind")
    assert ops.get("pauses/", color="red")[1]["code"] == "unknown_parameter"


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"kind": "queue", "name": "has space"}, "invalid", "name"),
        ({"kind": "queue", "name": ""}, "invalid", "name"),
        ({"kind": "queue", "name": "q" * 101}, "invalid", "name"),
        ({"kind": "job", "name": "a b"}, "invalid", "name"),
        ({"kind": "job", "name": "j" * 201}, "invalid", "name"),
        ({"kind": "job", "name": "a\ud800"}, "invalid", "name"),
        ({"kind": "job", "name": "\udfff"}, "invalid", "name"),
        ({"kind": "queue", "name": "\ud800"}, "invalid", "name"),
        ({"kind": "queue", "name": "default\n"}, "invalid", "name"),
        ({"kind": "job", "name": "testapp.jobs.noop\n"}, "invalid", "name"),
        ({"kind": "queue", "name": 7}, "invalid", "name"),
        ({"kind": "queue"}, "invalid", "name"),
        ({"kind": "schedule", "name": "x"}, "invalid", "kind"),
        ({"name": "mail"}, "invalid", "kind"),
        ({"kind": "queue", "name": "mail", "by": "me"}, "unknown_field", "by"),
        (["queue", "mail"], "invalid", None),
    ],
)
@pytest.mark.parametrize("path", ["pauses/", "pauses/resume/"])
def test_bad_input_is_refused_with_its_field_and_changes_nothing(caller, path, body, code, field):
    ops = caller(*PAUSE)
    status, answer = ops.post(path, body)
    assert (status, answer["code"], answer["field"]) == (400, code, field)
    assert not Pause.objects.exists()
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("path", ["pauses/", "pauses/resume/"])
def test_a_body_that_is_not_json_is_refused(caller, path):
    ops = caller(*PAUSE)
    assert ops.post(path, raw="{kind")[1]["code"] == "invalid_json"
    assert ops.post(path, raw='{"kind": "queue", "name": NaN}')[1]["code"] == "invalid_json"
    assert not Pause.objects.exists()


@pytest.mark.parametrize("missing", PAUSE)
def test_pause_and_resume_need_view_job_and_pause_queue(caller, missing):
    lacking = caller(*[p for p in ALL if p != missing])
    for path in ("pauses/", "pauses/resume/"):
        status, body = lacking.post(path, {"kind": "queue", "name": "mail"})
        assert (status, body["code"]) == (403, "permission_denied")
        assert missing in body["message"]
    assert not Pause.objects.exists()


def test_listing_needs_only_view_job(caller):
    protocol.pause(queue="mail")
    assert caller("view_job").get("pauses/")[0] == 200
    status, body = caller(*[p for p in ALL if p != "view_job"]).get("pauses/")
    assert (status, body["code"]) == (403, "permission_denied")


def test_a_session_callers_pause_needs_the_csrf_token(db):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("ops", list(PAUSE)))
    response = strict.post(
        "/jobs/api/pauses/", {"kind": "queue", "name": "mail"}, content_type="application/json"
    )
    assert (response.status_code, response.json()["code"]) == (403, "csrf_failed")
    assert not Pause.objects.exists()


def test_pausing_a_job_name_that_names_no_job_is_400(caller):
    status, answer = caller(*PAUSE).post("pauses/", {"kind": "job", "name": "testapp.jobs.nop"})
    assert (status, answer["code"], answer["field"]) == (400, "invalid", "name")
    assert "Did you mean 'testapp.jobs.noop'" in answer["message"]
    assert not Pause.objects.exists()


@pytest.mark.django_db(databases=["default", "shard"])
def test_a_shard_s_queue_is_paused_in_the_shard_and_found_there_again(caller):
    ops = caller(*PAUSE)
    with override_settings(LEASEJOBS_QUEUE_DATABASES={"reports": "shard"}):
        first = ops.post("pauses/", {"kind": "queue", "name": "reports"})
        assert list(Pause.objects.using("shard").values_list("name", flat=True)) == ["reports"]
        again = ops.post("pauses/", {"kind": "queue", "name": "reports"})
        lifted = ops.post("pauses/resume/", {"kind": "queue", "name": "reports"})
    assert (first[0], again[0], lifted[0]) == (201, 200, 200)
    assert again[1]["paused_at"] == first[1]["paused_at"]
    assert not Pause.objects.using("default").exists()
    assert not Pause.objects.using("shard").exists()
    assert _log_messages() == [
        "Paused queue reports in database 'shard' (API)",
        "Resumed queue reports in database 'shard' (API)",
    ]
