"""Permission and CSRF refusals: a refused request changes nothing and writes no log entry."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from testapp import jobs

from django_leasejobs.models import DeadLetter, Job

from .conftest import VIEW, staff_client, url

pytestmark = pytest.mark.django_db


def snapshot() -> tuple[list[dict], list[dict]]:
    return list(Job.objects.order_by("pk").values()), list(
        DeadLetter.objects.order_by("pk").values()
    )


@pytest.fixture
def world(dead_letter, failed_job) -> dict:
    """One job or dead letter in each state an action would accept."""
    return {
        "pending": jobs.noop.enqueue(delay=3600),
        "failed": failed_job(),
        "letter": dead_letter(),
    }


def hand_made_posts(world: dict) -> list[tuple[str, dict]]:
    pending, failed, letter = world["pending"], world["failed"], world["letter"]
    return [
        (url("job_cancel", pending.pk), {}),
        (url("job_run_now", pending.pk), {}),
        (url("job_retry", failed.pk), {}),
        (url("deadletter_replay", letter.pk), {"as_is": "1"}),
        (url("deadletter_replay", letter.pk), {"args": "[1, 1]", "kwargs": "{}"}),
        (url("job_changelist"), {"action": "cancel_jobs", "_selected_action": [pending.pk]}),
        (url("job_changelist"), {"action": "run_jobs_now", "_selected_action": [pending.pk]}),
        (url("job_changelist"), {"action": "retry_jobs_now", "_selected_action": [failed.pk]}),
        (
            url("deadletter_changelist"),
            {"action": "replay_selected", "_selected_action": [letter.pk]},
        ),
        (url("deadletter_group_action", letter.fingerprint, "replay"), {"through_id": letter.pk}),
        (url("deadletter_group_action", letter.fingerprint, "discard"), {"through_id": letter.pk}),
    ]


class TestViewOnlyStaff:
    def test_sees_no_action_buttons_and_no_bulk_actions(self, viewer, world) -> None:
        for page_url in (
            url("job_change", world["pending"].pk),
            url("job_change", world["failed"].pk),
            url("deadletter_change", world["letter"].pk),
        ):
            response = viewer.get(page_url)
            assert response.status_code == 200
            page = response.content.decode()
            assert 'class="leasejobs-action"' not in page, page_url
            assert "Replay with edited arguments" not in page, page_url
        for page_url in (url("job_changelist"), url("deadletter_changelist")):
            response = viewer.get(page_url)
            assert response.status_code == 200
            assert response.context["action_form"] is None, page_url
            assert 'name="action"' not in response.content.decode()

    def test_hand_made_posts_change_nothing(self, viewer, world) -> None:
        before = snapshot()
        for page_url, data in hand_made_posts(world):
            response = viewer.post(page_url, data)
            if "action" in data:  # no action is allowed: Django ignores the POST, shows the list
                assert response.status_code == 200, page_url
            else:
                assert response.status_code == 403, page_url
        assert snapshot() == before
        assert not LogEntry.objects.exists()

    def test_replay_form_is_refused(self, viewer, world) -> None:
        assert viewer.get(url("deadletter_replay", world["letter"].pk)).status_code == 403

    def test_one_permission_does_not_grant_another(self, world) -> None:
        canceller = staff_client("canceller", [*VIEW, "cancel_job"])
        before = snapshot()
        assert canceller.post(url("job_run_now", world["pending"].pk)).status_code == 403
        assert canceller.post(url("job_retry", world["failed"].pk)).status_code == 403
        replay = url("deadletter_replay", world["letter"].pk)
        assert canceller.post(replay, {"as_is": "1"}).status_code == 403
        assert snapshot() == before
        page = canceller.get(url("job_change", world["pending"].pk)).content.decode()
        assert 'id="leasejobs-cancel"' in page
        assert 'id="leasejobs-run-now"' not in page
        actions = canceller.get(url("job_changelist")).context["action_form"]
        choices = [name for name, _ in actions.fields["action"].choices if name]
        assert choices == ["cancel_jobs"]

    def test_anonymous_users_are_sent_to_the_login_page(self, world) -> None:
        before = snapshot()
        for page_url, data in hand_made_posts(world):
            response = Client().post(page_url, data)
            assert response.status_code == 302, page_url
            assert "/login/" in response["Location"], page_url
        assert snapshot() == before


class TestCsrf:
    @pytest.fixture
    def csrf_client(self, db) -> Client:
        client = Client(enforce_csrf_checks=True)
        client.force_login(User.objects.create_superuser("root"))
        return client

    def test_posts_without_a_token_are_refused(self, csrf_client, world) -> None:
        before = snapshot()
        for page_url, data in hand_made_posts(world):
            assert csrf_client.post(page_url, data).status_code == 403, page_url
        assert snapshot() == before
        assert not LogEntry.objects.exists()

    def test_the_same_posts_with_the_token_work(self, csrf_client, world) -> None:
        csrf_client.get(url("job_change", world["pending"].pk))  # sets the CSRF cookie
        token = csrf_client.cookies["csrftoken"].value
        response = csrf_client.post(
            url("job_cancel", world["pending"].pk), {"csrfmiddlewaretoken": token}
        )
        assert response.status_code == 302
        response = csrf_client.post(
            url("deadletter_replay", world["letter"].pk),
            {"as_is": "1", "csrfmiddlewaretoken": token},
        )
        assert response.status_code == 302
        assert LogEntry.objects.count() == 3  # cancel; replay on the letter and the new job
