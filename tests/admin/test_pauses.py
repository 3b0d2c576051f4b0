"""Pause and resume on the queue dashboard: permission, confirmation, admin log, the buttons."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Pause

from .conftest import VIEW, staff_client, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def pauser(db) -> Client:
    return staff_client("pauser", [*VIEW, "pause_queue"])


def test_pause_asks_to_confirm_then_pauses_and_logs_who(pauser: Client) -> None:
    jobs.noop.enqueue(queue="mail")
    page = pauser.get(url("dashboard"))
    assert b"Pause\xe2\x80\xa6" in page.content
    asked = pauser.post(url("pause", "pause"), {"kind": "queue", "name": "mail"})
    assert asked.status_code == 200
    assert b"Yes, pause queue mail" in asked.content
    assert not Pause.objects.exists(), "nothing changes before the confirmation"
    done = pauser.post(url("pause", "pause"), {"kind": "queue", "name": "mail", "confirm": "yes"})
    assert done.status_code == 302
    pause = Pause.objects.get()
    assert (pause.kind, pause.name, pause.paused_by) == ("queue", "mail", "pauser")
    entry = LogEntry.objects.get()
    assert entry.user.username == "pauser"
    assert entry.change_message == "Paused queue mail."
    assert entry.object_id == str(pause.pk)
    dashboard = pauser.get(url("dashboard")).content.decode()
    assert "paused 0s" in dashboard
    assert "Resume…" in dashboard


def test_resume_of_a_job_name_logs_and_lifts_it(pauser: Client) -> None:
    protocol.pause(job=jobs.noop.name, by="someone")
    page = pauser.get(url("dashboard")).content.decode()
    assert jobs.noop.name in page
    assert "someone" in page
    pauser.post(url("pause", "resume"), {"kind": "job", "name": jobs.noop.name, "confirm": "yes"})
    assert not Pause.objects.exists()
    assert LogEntry.objects.get().change_message == f"Resumed job {jobs.noop.name}."


def test_nothing_to_change_is_said_and_not_logged(pauser: Client) -> None:
    response = pauser.post(
        url("pause", "resume"), {"kind": "queue", "name": "mail", "confirm": "yes"}, follow=True
    )
    assert b"was not paused: nothing changed" in response.content
    assert not LogEntry.objects.exists()


def test_bad_input_is_refused_with_a_message(pauser: Client) -> None:
    response = pauser.post(
        url("pause", "pause"), {"kind": "queue", "name": "bad queue", "confirm": "yes"}, follow=True
    )
    assert b"is not a valid queue name" in response.content
    assert not Pause.objects.exists()
    response = pauser.post(
        url("pause", "pause"), {"kind": "job", "name": "", "confirm": "yes"}, follow=True
    )
    assert b"Job must be a job name" in response.content
    assert not Pause.objects.exists()


def test_viewers_see_no_button_and_a_hand_made_post_changes_nothing(viewer: Client) -> None:
    jobs.noop.enqueue(queue="mail")
    page = viewer.get(url("dashboard"))
    assert page.status_code == 200
    assert b"Pause\xe2\x80\xa6" not in page.content
    assert b"leasejobs-pause-job" not in page.content
    for action in ("pause", "resume"):
        response = viewer.post(url("pause", action), {"name": "mail", "confirm": "yes"})
        assert response.status_code == 403
    assert not Pause.objects.exists()
    assert not LogEntry.objects.exists()


def test_the_permission_alone_without_view_is_refused(db) -> None:
    client = staff_client("blind", ["pause_queue"])
    response = client.post(url("pause", "pause"), {"name": "mail", "confirm": "yes"})
    assert response.status_code == 403
    assert not Pause.objects.exists()


def test_get_is_not_allowed(pauser: Client) -> None:
    assert pauser.get(url("pause", "pause")).status_code == 405
    assert not Pause.objects.exists()


def test_an_unknown_action_is_refused(pauser: Client) -> None:
    response = pauser.post(url("pause", "drop"), {"name": "mail", "confirm": "yes"})
    assert response.status_code == 403
    assert not Pause.objects.exists()
