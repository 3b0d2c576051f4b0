"""Who may do what: tokens (expiry, revocation), sessions (CSRF), and each permission."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from testapp import jobs

from django_leasejobs.models import ApiToken, DeadLetter, Job, Schedule
from django_leasejobs.upkeep import api_tokens as tokens

from .conftest import ALL, Caller, make_user


def endpoints(
    job: Job, letter: DeadLetter, schedule: Schedule
) -> list[tuple[str, str, dict, tuple]]:
    """(method, path, body, permissions needed) for every operation but the public root."""
    add = {"name": "testapp.jobs.add", "args": [1, 2]}
    window = {"start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z"}
    return [
        ("post", "jobs/", add, ("add_job",)),
        ("post", "jobs/batch/", {"jobs": [add]}, ("add_job",)),
        ("get", "jobs/", {}, ("view_job",)),
        ("get", f"jobs/{job.pk}/", {}, ("view_job",)),
        ("post", f"jobs/{job.pk}/cancel/", None, ("view_job", "cancel_job")),
        ("post", f"jobs/{job.pk}/retry/", None, ("view_job", "run_job_now")),
        ("get", "dead-letters/", {}, ("view_deadletter",)),
        ("get", f"dead-letters/{letter.pk}/", {}, ("view_deadletter",)),
        (
            "post",
            f"dead-letters/{letter.pk}/replay/",
            None,
            ("view_deadletter", "replay_deadletter"),
        ),
        ("get", "schedules/", {}, ("view_schedule",)),
        ("get", f"schedules/{schedule.pk}/occurrences/", window, ("view_schedule", "view_job")),
        ("get", "queues/", {}, ("view_job",)),
        ("get", "health/", {}, ("view_job",)),
        ("get", "pauses/", {}, ("view_job",)),
        ("post", "pauses/", {"kind": "queue", "name": "mail"}, ("view_job", "pause_queue")),
        (
            "post",
            "pauses/resume/",
            {"kind": "queue", "name": "mail"},
            ("view_job", "pause_queue"),
        ),
    ]


@pytest.fixture
def rows(db, make_due):
    from django_leasejobs import protocol
    from django_leasejobs.protocol import Failure

    job = jobs.add.enqueue(1, 2)
    dead = jobs.add.enqueue(3, 4, max_attempts=1)
    make_due(dead)
    claimed = protocol.claim("api-test", batch=5)
    protocol.fail(dead.pk, next(c.attempt for c in claimed if c.pk == dead.pk), Failure("x", "tb"))
    letter = DeadLetter.objects.get(job=dead)
    schedule = Schedule.objects.create(name="hourly", cron="0 * * * *", job="testapp.jobs.noop")
    return job, letter, schedule


def call(who: Caller, method: str, path: str, body) -> int:
    if method == "get":
        return who.get(path, **(body or {}))[0]
    return who.post(path, body)[0]


def test_each_operation_needs_its_permissions_and_no_other(caller, rows):
    for method, path, body, needed in endpoints(*rows):
        for missing in needed:
            lacking = caller(*[p for p in ALL if p != missing])
            status = call(lacking, method, path, body)
            assert status == 403, (method, path, missing)
            assert lacking.last.json()["code"] == "permission_denied"
            assert missing in lacking.last.json()["message"]
        exact = caller(*needed)
        assert call(exact, method, path, body) not in (401, 403), (method, path)


def test_no_credentials_is_401_everywhere_but_the_root(client, rows):
    for method, path, _body, _ in endpoints(*rows):
        response = getattr(client, method)(f"/jobs/api/{path}")
        assert response.status_code == 401, path
        assert response.json()["code"] == "not_authenticated"
    assert client.get("/jobs/api/").status_code == 200


@pytest.mark.parametrize("header", ["Bearer nope", "Bearer ", "bearer ljt_" + "a" * 43])
def test_unknown_token_is_401(client, db, header):
    response = client.get("/jobs/api/jobs/", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_token"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_token_is_stored_hashed_and_shown_once(operator):
    token = ApiToken.objects.get(user=operator.user)
    assert operator.secret not in (token.digest, token.prefix)
    assert token.digest == tokens.digest(operator.secret)
    assert operator.secret.startswith(token.prefix)
    assert len(operator.secret) > 40


def test_expired_token_is_refused(operator):
    assert operator.get("jobs/")[0] == 200
    ApiToken.objects.filter(user=operator.user).update(
        expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
    )
    status, body = operator.get("jobs/")
    assert (status, body["code"]) == (401, "invalid_token")
    assert "expired" in body["message"]


def test_token_with_future_expiry_works(db):
    user = make_user("soon", ["view_job"])
    _, secret = tokens.issue(user, expires_in=dt.timedelta(days=1))
    assert Caller(user, secret).get("jobs/")[0] == 200
    with pytest.raises(ValueError, match="positive"):
        tokens.issue(user, expires_in=dt.timedelta(0))


def test_revoked_token_is_refused(operator):
    token = ApiToken.objects.get(user=operator.user)
    assert tokens.revoke(token.pk) is True
    assert tokens.revoke(token.pk) is False
    status, body = operator.get("jobs/")
    assert (status, body["code"]) == (401, "invalid_token")
    assert "revoked" in body["message"]


def test_inactive_users_token_is_refused(operator):
    User.objects.filter(pk=operator.user.pk).update(is_active=False)
    assert operator.get("jobs/")[0] == 401


def test_last_used_is_recorded(operator):
    assert ApiToken.objects.get(user=operator.user).last_used_at is None
    operator.get("jobs/")
    assert ApiToken.objects.get(user=operator.user).last_used_at is not None


def test_token_permissions_are_the_users(caller):
    viewer = caller("view_job")
    job = jobs.add.enqueue(1, 2)
    assert viewer.post(f"jobs/{job.pk}/cancel/")[0] == 403
    viewer.user.user_permissions.add(
        *viewer.user.user_permissions.model.objects.filter(codename="cancel_job")
    )
    viewer.user = User.objects.get(pk=viewer.user.pk)  # a fresh permission cache
    assert viewer.post(f"jobs/{job.pk}/cancel/")[0] == 200


# --------------------------------------------------------------------------- sessions and CSRF


def session_client(*codenames: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("browser", list(codenames)))
    return client


def test_session_reads_without_csrf(db):
    client = session_client("view_job")
    assert client.get("/jobs/api/jobs/").status_code == 200


def test_session_post_without_csrf_token_is_refused(db):
    client = session_client(*ALL)
    body = json.dumps({"name": "testapp.jobs.add", "args": [1, 2]})
    response = client.post("/jobs/api/jobs/", body, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["code"] == "csrf_failed"
    assert not Job.objects.exists()


def test_session_post_with_csrf_token_is_accepted(db):
    client = session_client(*ALL)
    client.get("/jobs/api/jobs/")  # any page that sets the cookie would do; set it by hand:
    from django.middleware.csrf import _get_new_csrf_string

    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    body = json.dumps({"name": "testapp.jobs.add", "args": [1, 2]})
    response = client.post(
        "/jobs/api/jobs/", body, content_type="application/json", headers={"X-CSRFToken": secret}
    )
    assert response.status_code == 201
    assert Job.objects.count() == 1


def test_token_caller_needs_no_csrf_token(operator):
    operator.client = Client(enforce_csrf_checks=True)
    assert operator.post("jobs/", {"name": "testapp.jobs.noop"})[0] == 201
