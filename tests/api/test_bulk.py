"""``POST jobs/bulk/``: the dry run, each action, its permission, the refusals and the log."""

from __future__ import annotations

import json

import jsonschema_rs
import pytest
from django.contrib.admin.models import LogEntry
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.api import schema
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure

from ..conftest import fields

PATH = "jobs/bulk/"


def documented(body, component: str = "BulkResult") -> None:
    document = json.loads(schema.rendered())
    checker = {**document, "$ref": f"#/components/schemas/{component}"}
    jsonschema_rs.Draft202012Validator(checker, validate_formats=True).validate(body)


@pytest.fixture
def dead(db, make_due):
    def make(queue: str = "mail") -> Job:
        job = jobs.add.using(queue=queue, max_attempts=1).enqueue(1, 2)
        make_due(job)
        (claimed,) = protocol.claim("api-bulk", batch=1, queues=[queue])
        protocol.fail(job.pk, claimed.attempt, Failure("OSError: disk full"))
        return job

    return make


def test_a_dry_run_counts_and_changes_nothing(caller, db):
    waiting = [jobs.noop.using(queue="mail").enqueue() for _ in range(3)]
    jobs.noop.using(queue="other").enqueue()
    viewer = caller("view_job")
    request = {"action": "cancel", "filter": {"queue": "mail"}, "dry_run": True}
    status, body = viewer.post(PATH, request)
    assert (status, body) == (200, {"matched": 3})
    documented(body)
    assert {fields(job.pk, "status")["status"] for job in waiting} == {Status.PENDING}
    assert not LogEntry.objects.exists()


def test_cancel_cancels_waiting_jobs_asks_running_ones_and_logs_once(caller, db, make_due):
    waiting = jobs.noop.using(queue="mail").enqueue()
    running = jobs.noop.using(queue="mail").enqueue()
    make_due(running)
    protocol.claim("api-bulk", batch=1, queues=["mail"])
    operator = caller("view_job", "cancel_job")
    status, body = operator.post(PATH, {"action": "cancel", "filter": {"queue": "mail"}})
    assert status == 200, body
    assert body == {
        "matched": 2,
        "changed": {"cancelled": 1, "cancel_requested": 1},
        "left": 0,
        "refused": [],
    }
    documented(body)
    assert fields(waiting.pk, "status")["status"] == Status.CANCELLED
    assert fields(running.pk, "cancel_requested_at")["cancel_requested_at"] is not None
    (entry,) = LogEntry.objects.all()
    assert entry.user_id == operator.user.pk
    assert entry.change_message.startswith(
        'Bulk cancel (API) of the jobs matching {"queue": "mail"}: 2 matched; '
    )


def test_retry_replays_dead_jobs_once(caller, dead):
    first, second = dead(), dead()
    operator = caller("view_job", "replay_deadletter")
    request = {"action": "retry", "filter": {"status": "dead", "error": "disk full"}}
    status, body = operator.post(PATH, request)
    assert (status, body["changed"], body["left"]) == (200, {"replayed": 2}, 0)
    replayed = DeadLetter.objects.filter(job__in=[first, second], replayed_job__isnull=False)
    assert replayed.count() == 2
    status, body = operator.post(PATH, request)
    assert (status, body["matched"], body["changed"]) == (200, 0, {"replayed": 0})


def test_delete_deletes_finished_jobs(caller, dead):
    gone = dead()
    live = jobs.noop.using(queue="mail").enqueue()
    operator = caller("view_job", "delete_job")
    status, body = operator.post(PATH, {"action": "delete", "filter": {"queue": "mail"}})
    assert (status, body["changed"]) == (200, {"deleted": 1})
    assert list(Job.objects.values_list("pk", flat=True)) == [live.pk]
    assert not Job.objects.filter(pk=gone.pk).exists()


@pytest.mark.parametrize(
    ("action", "permission"),
    [("cancel", "cancel_job"), ("retry", "replay_deadletter"), ("delete", "delete_job")],
)
def test_each_action_needs_its_permission(caller, db, action, permission):
    job = jobs.noop.using(queue="mail").enqueue()
    others = [p for p in ("cancel_job", "replay_deadletter", "delete_job") if p != permission]
    refused = caller("view_job", *others)
    status, body = refused.post(PATH, {"action": action, "filter": {"queue": "mail"}})
    assert (status, body["code"]) == (403, "permission_denied")
    assert permission in body["message"]
    assert fields(job.pk, "status")["status"] == Status.PENDING
    assert not LogEntry.objects.exists()
    # The dry run changes nothing: view_job is enough.
    status, body = refused.post(
        PATH, {"action": action, "filter": {"queue": "mail"}, "dry_run": True}
    )
    assert status == 200
    nobody = caller(permission)
    status, body = nobody.post(PATH, {"action": action, "filter": {"queue": "mail"}})
    assert (status, body["code"]) == (403, "permission_denied")


@pytest.mark.parametrize(
    ("request_body", "code", "field", "words"),
    [
        ({"filter": {"queue": "a"}}, "invalid", "action", "one of cancel, retry, delete"),
        ({"action": "purge", "filter": {"queue": "a"}}, "invalid", "action", "not 'purge'"),
        # Found by the fuzzing: an object as the action was a 500 (unhashable).
        ({"action": {}, "filter": {"queue": "a"}}, "invalid", "action", "not {}"),
        ({"action": ["cancel"], "filter": {"queue": "a"}}, "invalid", "action", "not ['cancel']"),
        ({"action": "cancel"}, "invalid", "filter", "filter is required"),
        ({"action": "cancel", "filter": []}, "invalid", "filter", "must be an object"),
        ({"action": "cancel", "filter": "queue=a"}, "invalid", "filter", "must be an object"),
        ({"action": "cancel", "filter": {}}, "invalid", "filter", "is empty"),
        (
            {"action": "cancel", "filter": {"colour": "red"}},
            "unknown_field",
            "filter.colour",
            "Unknown filter key",
        ),
        (
            {"action": "cancel", "filter": {"created_before": "last week"}},
            "invalid",
            "filter.created_before",
            "ISO 8601",
        ),
        (
            {"action": "cancel", "filter": {"finished_after": "2025-01-31T12:00:00"}},
            "invalid",
            "filter.finished_after",
            "UTC offset",
        ),
        (
            {"action": "cancel", "filter": {"status": "succeeded"}},
            "invalid",
            "filter.status",
            "cancel acts on pending, failed, running jobs only",
        ),
        (
            {"action": "cancel", "filter": {"queue": "a"}, "dry_run": "yes"},
            "invalid",
            "dry_run",
            "true or false",
        ),
        (
            {"action": "cancel", "filter": {"queue": "a"}, "force": True},
            "unknown_field",
            "force",
            "Unknown field",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_field(caller, request_body, code, field, words):
    allowed = caller("view_job", "cancel_job", "replay_deadletter", "delete_job")
    status, body = allowed.post(PATH, request_body)
    assert (status, body["code"], body["field"]) == (400, code, field), body
    assert words in body["message"]
    assert not LogEntry.objects.exists()


def test_only_post(operator):
    status, body = operator.get(PATH)
    assert (status, body["code"]) == (405, "method_not_allowed")
