"""The job list's bulk actions: links keeping the filters, the confirmation page's count, the
POST (CSRF, permission) acting on the whole filtered list, and one admin log entry."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from testapp import jobs

from django_leasejobs.models import DeadLetter, Job, Status

from ..conftest import fields
from .conftest import VIEW, staff_client

LIST = "/admin/django_leasejobs/job/"


def url(action: str, query: str = "") -> str:
    return reverse("admin:django_leasejobs_job_bulk", args=[action]) + (
        f"?{query}" if query else ""
    )


@pytest.fixture
def canceller(db) -> Client:
    return staff_client("canceller", [*VIEW, "cancel_job"])


@pytest.fixture
def mail_jobs(db) -> list[Job]:
    """More jobs than a page of the list shows: the action is not limited to one page."""
    rows = jobs.noop.using(queue="mail").enqueue_many([((), {})] * 60)
    jobs.noop.using(queue="other").enqueue()
    return rows


def test_the_list_links_to_the_actions_the_user_may_take_keeping_its_filters(canceller, viewer, db):
    page = canceller.get(LIST, {"queue": "mail"}).content.decode()
    assert f'href="{url("cancel", "queue=mail")}"' in page
    assert "Cancel all matching" in page
    assert "leasejobs-bulk-retry" not in page
    assert "leasejobs-bulk-delete" not in page
    assert "leasejobs-bulk-" not in viewer.get(LIST).content.decode()


def test_the_page_shows_the_count_and_changes_nothing(canceller, mail_jobs):
    response = canceller.get(url("cancel", "queue=mail"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "<strong>60</strong> jobs of the list are pending, failed or running" in page
    assert "Yes, cancel all 60 matching jobs" in page
    assert f'name="through_id" value="{mail_jobs[-1].pk}"' in page
    assert Job.objects.filter(status=Status.CANCELLED).count() == 0


def test_the_post_cancels_the_whole_filtered_list_and_logs_once(canceller, mail_jobs):
    through = mail_jobs[-1].pk
    later = jobs.noop.using(queue="mail").enqueue()  # after the page: not acted on unseen
    response = canceller.post(url("cancel", "queue=mail"), {"through_id": through})
    assert response.status_code == 302
    assert response["Location"] == f"{LIST}?queue=mail"
    assert Job.objects.filter(queue="mail", status=Status.CANCELLED).count() == 60
    assert fields(later.pk, "status")["status"] == Status.PENDING
    assert Job.objects.get(queue="other").status == Status.PENDING
    (entry,) = LogEntry.objects.all()
    assert entry.change_message.startswith(
        'Bulk cancel (admin) of the jobs matching {"queue": "mail"}: 60 matched; cancelled 60'
    )
    messages = [str(m) for m in response.wsgi_request._messages]
    assert messages == ["Bulk cancel: 60 matched; cancelled 60, cancel requested 0; left 0."]


def test_the_search_narrows_the_list_as_it_does_the_page(canceller, db):
    kept = jobs.noop.using(queue="mail", dedupe_key="keep-me").enqueue()
    gone = jobs.noop.using(queue="mail", dedupe_key="cancel-me").enqueue()
    canceller.post(url("cancel", "q=cancel-me"), {"through_id": gone.pk})
    assert fields(gone.pk, "status")["status"] == Status.CANCELLED
    assert fields(kept.pk, "status")["status"] == Status.PENDING


@pytest.mark.parametrize(
    ("action", "permission"),
    [("cancel", "cancel_job"), ("retry", "replay_deadletter"), ("delete", "delete_job")],
)
def test_each_action_needs_its_permission(db, mail_jobs, action, permission):
    others = [p for p in ("cancel_job", "replay_deadletter", "delete_job") if p != permission]
    refused = staff_client("refused", [*VIEW, *others])
    assert refused.get(url(action, "queue=mail")).status_code == 403
    assert (
        refused.post(url(action, "queue=mail"), {"through_id": mail_jobs[-1].pk}).status_code == 403
    )
    assert not LogEntry.objects.exists()
    assert Job.objects.filter(status=Status.PENDING).count() == 61
    allowed = staff_client("allowed", [*VIEW, permission])
    assert allowed.get(url(action, "queue=mail")).status_code == 200


def test_a_post_without_the_csrf_token_changes_nothing(db, mail_jobs):
    staff_client("csrf", [*VIEW, "cancel_job"])
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.get(username="csrf"))
    response = client.post(url("cancel", "queue=mail"), {"through_id": mail_jobs[-1].pk})
    assert response.status_code == 403
    assert Job.objects.filter(status=Status.CANCELLED).count() == 0


def test_retry_and_delete_from_the_list(db, dead_letter):
    letter = dead_letter()
    client = staff_client("both", [*VIEW, "replay_deadletter", "delete_job"])
    page = client.get(url("retry", "status__exact=dead")).content.decode()
    assert "<strong>1</strong> job of the list is dead" in page
    client.post(url("retry", "status__exact=dead"), {"through_id": letter.job_id})
    letter.refresh_from_db()
    assert letter.replayed_job_id is not None
    assert (
        "<strong>0</strong> jobs" in client.get(url("retry", "status__exact=dead")).content.decode()
    )
    # The dead job goes with its dead letter; its replay, a pending job, stays.
    client.post(url("delete", "status__exact=dead"), {"through_id": letter.job_id})
    assert not DeadLetter.objects.exists()
    assert Job.objects.filter(pk=letter.replayed_job_id).exists()


@pytest.mark.parametrize(
    ("path", "data", "status"),
    [
        (url("purge"), None, 404),
        (url("cancel", "queue=mail"), {"through_id": "x"}, 400),
        (url("cancel", "colour=red"), None, 400),
    ],
)
def test_bad_requests_are_refused(canceller, db, path, data, status):
    response = canceller.post(path, data) if data is not None else canceller.get(path)
    assert response.status_code == status
    assert not LogEntry.objects.exists()
