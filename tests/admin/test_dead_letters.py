"""The dead-letter admin: detail, replay one or many, replay with edited arguments."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_leasejobs import protocol
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure

from .conftest import SCRIPT, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def task_dead_letter(make_due):
    """A dead letter of the ``testapp.tasks.add`` task, enqueued through the tasks backend."""
    from testapp import tasks

    def make() -> DeadLetter:
        result = tasks.add.using(max_attempts=1).enqueue(2, 3)
        job = Job.objects.get(pk=int(result.id))
        make_due(job)
        (running,) = protocol.claim("admin-test-worker", batch=1)
        protocol.fail(job.pk, running.attempt, Failure("boom", "Traceback: boom"))
        return DeadLetter.objects.get(job=job)

    return make


def messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


class TestListAndDetail:
    def test_list_shows_reason_last_error_and_links(self, admin_client, dead_letter) -> None:
        letter = dead_letter(error="ValueError: bad order")
        page = admin_client.get(url("deadletter_changelist")).content.decode()
        assert "attempts exhausted" in page
        assert "ValueError: bad order" in page
        assert url("job_change", letter.job_id) in page

    def test_detail_shows_history_and_links_both_ways(self, admin_client, dead_letter) -> None:
        letter = dead_letter(error="ValueError: bad order", traceback="File jobs.py, line 3")
        page = admin_client.get(url("deadletter_change", letter.pk)).content.decode()
        assert "File jobs.py, line 3" in page
        assert "admin-test-worker" in page
        assert url("job_change", letter.job_id) in page
        job_page = admin_client.get(url("job_change", letter.job_id)).content.decode()
        assert url("deadletter_change", letter.pk) in job_page

    def test_script_in_arguments_error_and_traceback_is_escaped(
        self, admin_client, dead_letter
    ) -> None:
        letter = dead_letter(SCRIPT, 1, error=SCRIPT, traceback=SCRIPT)
        for page_url in (
            url("deadletter_changelist"),
            url("deadletter_change", letter.pk),
            url("deadletter_replay", letter.pk),
        ):
            page = admin_client.get(page_url).content.decode()
            assert "<script>alert" not in page, page_url
            assert "&lt;script&gt;alert" in page, page_url

    @pytest.mark.parametrize(
        "query", ["queue=%00", "name=%00", "reason__exact=%00", "fingerprint=%00"]
    )
    def test_a_nul_in_a_filter_is_an_invalid_lookup(self, admin_client, dead_letter, query):
        # PostgreSQL's driver cannot send a NUL (a 500 there); Django's answer: ?e=1.
        dead_letter()
        response = admin_client.get(f"{url('deadletter_changelist')}?{query}")
        assert response.status_code == 302
        assert response["Location"] == f"{url('deadletter_changelist')}?e=1"

    @pytest.mark.parametrize("letter_id", [str(2**63), "9" * 4301, "\u00b2"])
    def test_an_id_no_row_can_have_is_not_found(self, admin_client, letter_id) -> None:
        # Past the largest key, more digits than int() reads, a digit int() refuses.
        base = url("deadletter_changelist")
        assert admin_client.get(f"{base}{letter_id}/replay/").status_code == 404
        assert admin_client.get(f"{base}{letter_id}/change/").status_code in (302, 404)


class TestReplay:
    def test_replay_button_creates_one_linked_job_that_succeeds(
        self, operator, dead_letter, run_due
    ) -> None:
        letter = dead_letter(2, 3)
        response = operator.post(url("deadletter_replay", letter.pk), {"as_is": "1"}, follow=True)
        letter.refresh_from_db()
        new = letter.replayed_job
        assert new is not None
        assert new.pk != letter.job_id
        assert (new.status, new.attempt, new.args) == (Status.PENDING, 0, [2, 3])
        assert f"Replayed dead letter #{letter.pk} as job #{new.pk}." in messages(response)
        assert LogEntry.objects.filter(
            object_id=str(letter.pk), action_flag=CHANGE, change_message__contains="Replayed"
        ).exists()
        assert LogEntry.objects.filter(object_id=str(new.pk), action_flag=ADDITION).exists()
        assert [(j.pk, j.status, j.result) for j in run_due()] == [(new.pk, "succeeded", 5)]
        page = operator.get(url("job_change", new.pk)).content.decode()
        assert url("deadletter_change", letter.pk) in page

    def test_replaying_twice_creates_one_job(self, operator, dead_letter) -> None:
        letter = dead_letter()
        operator.post(url("deadletter_replay", letter.pk), {"as_is": "1"})
        response = operator.post(url("deadletter_replay", letter.pk), {"as_is": "1"}, follow=True)
        letter.refresh_from_db()
        assert (
            f"Dead letter #{letter.pk} was already replayed as job #{letter.replayed_job_id}."
            in (messages(response))
        )
        assert Job.objects.count() == 2
        page = operator.get(url("deadletter_change", letter.pk)).content.decode()
        assert 'id="leasejobs-replay"' not in page

    def test_bulk_replay(self, operator, dead_letter) -> None:
        letters = [dead_letter(i, i) for i in range(3)]
        data = {"action": "replay_selected", "_selected_action": [x.pk for x in letters]}
        operator.post(url("deadletter_changelist"), data)
        response = operator.post(url("deadletter_changelist"), data, follow=True)
        replayed = DeadLetter.objects.exclude(replayed_job=None).count()
        assert replayed == 3
        assert Job.objects.count() == 6
        assert sum("already replayed" in t for t in messages(response)) == 3

    def test_bulk_replay_of_an_unregistered_job_is_refused(self, operator, dead_letter) -> None:
        good, bad = dead_letter(), dead_letter()
        DeadLetter.objects.filter(pk=bad.pk).update(name="gone.module.job")
        response = operator.post(
            url("deadletter_changelist"),
            {"action": "replay_selected", "_selected_action": [good.pk, bad.pk]},
            follow=True,
        )
        texts = messages(response)
        assert any(
            f"Dead letter #{bad.pk} was not replayed: No job is registered" in t for t in texts
        )
        assert DeadLetter.objects.get(pk=bad.pk).replayed_job_id is None
        assert DeadLetter.objects.get(pk=good.pk).replayed_job_id is not None


class TestReplayEdited:
    def test_form_is_prefilled_with_the_dead_arguments(self, operator, dead_letter) -> None:
        letter = dead_letter(7, 8)
        response = operator.get(url("deadletter_replay", letter.pk))
        form = response.context["form"]
        assert json.loads(form.initial["args"]) == [7, 8]
        assert json.loads(form.initial["kwargs"]) == {}

    def test_edited_arguments_are_used(self, operator, dead_letter, run_due) -> None:
        letter = dead_letter(7, 8)
        response = operator.post(
            url("deadletter_replay", letter.pk), {"args": "[40, 2]", "kwargs": "{}"}
        )
        letter.refresh_from_db()
        assert response.status_code == 302
        assert response["Location"] == url("job_change", letter.replayed_job_id)
        assert [(j.status, j.result) for j in run_due()] == [("succeeded", 42)]
        assert LogEntry.objects.filter(
            object_id=str(letter.pk), change_message__contains="with edited arguments"
        ).exists()

    @pytest.mark.parametrize(
        ("args", "kwargs", "error"),
        [
            ("[1, ", "{}", "Not valid JSON"),
            ('{"a": 1}', "{}", "args must be a JSON list."),
            ("[1]", "[]", "kwargs must be a JSON object."),
            ("[NaN, 1]", "{}", "NaN"),
            ('["\\u0000"]', "{}", "NUL character"),
            ('["a\\ud800"]', "{}", "args[0] contains a lone surrogate"),
            ("[]", '{"x": "\\udfff"}', "kwargs[&#x27;x&#x27;] contains a lone surrogate"),
            ("[]", '{"\\ud800": 1}', "kwargs has a key with a lone surrogate"),
            ('["' + "x" * 300_000 + '"]', "{}", "LEASEJOBS_MAX_PAYLOAD_BYTES"),
            ("", "{}", "This field is required."),
            ("[" + "1" * 5000 + "]", "{}", "an integer too long to read"),
            ("[]", '{"n": -' + "9" * 5000 + "}", "an integer too long to read"),
            ("[" * 100_000 + "]" * 100_000, "{}", "nests deeper than 31 levels"),
            ("[]", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests deeper than 31 levels"),
            ("[1e16, 1]", "{}", "args[0] contains 1e+16: a float of 1e16 or more"),
            ("[1, 2, 3]", "{}", "cannot take these arguments: too many positional arguments"),
            ("[1]", '{"c": 2}', "missing a required argument: &#x27;b&#x27;"),
            (
                "[-0.0, 1]",
                "{}",
                "args[0] contains -0.0: PostgreSQL&#x27;s jsonb gives it back as 0.0",
            ),
        ],
    )
    def test_invalid_arguments_show_an_error_and_write_nothing(
        self, operator, dead_letter, args, kwargs, error
    ) -> None:
        letter = dead_letter()
        response = operator.post(
            url("deadletter_replay", letter.pk), {"args": args, "kwargs": kwargs}
        )
        assert response.status_code == 200
        assert error in response.content.decode()
        letter.refresh_from_db()
        assert letter.replayed_job_id is None
        assert Job.objects.count() == 1
        assert not LogEntry.objects.exists()

    def test_already_replayed_letter_is_not_replayed_again_with_other_arguments(
        self, operator, dead_letter
    ) -> None:
        letter = dead_letter()
        operator.post(url("deadletter_replay", letter.pk), {"as_is": "1"})
        response = operator.post(
            url("deadletter_replay", letter.pk), {"args": "[5, 5]", "kwargs": "{}"}, follow=True
        )
        assert any("already replayed" in t for t in messages(response))
        assert Job.objects.count() == 2
        assert not Job.objects.filter(args=[5, 5]).exists()

    def test_bad_input_from_staff_with_the_permission_and_a_csrf_token(self, dead_letter) -> None:
        user = User.objects.create_user("replayer", is_staff=True)
        user.user_permissions.set(
            Permission.objects.filter(
                codename__in=["view_deadletter", "view_job", "replay_deadletter"]
            )
        )
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        letter = dead_letter()
        client.get(url("deadletter_replay", letter.pk))  # sets the CSRF cookie
        token = client.cookies["csrftoken"].value
        for args in ("[" + "1" * 5000 + "]", "[" * 100_000 + "]" * 100_000):
            response = client.post(
                url("deadletter_replay", letter.pk),
                {"args": args, "kwargs": "{}", "csrfmiddlewaretoken": token},
            )
            assert response.status_code == 200
            assert "errornote" in response.content.decode() or "errorlist" in (
                response.content.decode()
            )
        letter.refresh_from_db()
        assert letter.replayed_job_id is None
        assert Job.objects.count() == 1
        assert not LogEntry.objects.exists()


class TestReplayChecksTheName:
    """A replay is an enqueue: a name that no longer runs is refused and nothing is written."""

    def test_edited_replay_of_an_unregistered_job_is_a_form_error(
        self, operator, dead_letter
    ) -> None:
        letter = dead_letter()
        DeadLetter.objects.filter(pk=letter.pk).update(name="gone.module.job")
        response = operator.post(
            url("deadletter_replay", letter.pk), {"args": "[1, 2]", "kwargs": "{}"}
        )
        assert response.status_code == 200
        assert "No job is registered as &#x27;gone.module.job&#x27;" in response.content.decode()
        assert DeadLetter.objects.get(pk=letter.pk).replayed_job_id is None
        assert Job.objects.count() == 1
        assert not LogEntry.objects.exists()

    @pytest.mark.parametrize(
        ("path", "message"),
        [
            ("testapp.jobs.add", "is a JobFunction, not a django.tasks Task"),
            ("os.path.join", "outside the installed apps"),
            ("testapp.gone.task", "cannot be imported"),
        ],
    )
    def test_a_task_path_that_is_not_a_task_is_refused(
        self, operator, task_dead_letter, path, message
    ) -> None:
        letter = task_dead_letter()
        DeadLetter.objects.filter(pk=letter.pk).update(name=path)
        with pytest.raises(JobValidationError, match=message):
            protocol.replay(letter.pk)
        with pytest.raises(JobValidationError, match=message):
            protocol.replay(letter.pk, args=[1, 2], kwargs={})
        response = operator.post(url("deadletter_replay", letter.pk), {"as_is": "1"}, follow=True)
        assert any(
            f"Dead letter #{letter.pk} was not replayed: " in t and message in t
            for t in messages(response)
        )
        response = operator.post(
            url("deadletter_replay", letter.pk), {"args": "[1, 2]", "kwargs": "{}"}
        )
        assert response.status_code == 200
        assert message in response.content.decode()
        assert DeadLetter.objects.get(pk=letter.pk).replayed_job_id is None
        assert Job.objects.count() == 1
        assert not LogEntry.objects.exists()

    def test_a_task_dead_letter_is_replayed_as_a_task(self, operator, task_dead_letter) -> None:
        letter = task_dead_letter()
        response = operator.post(url("deadletter_replay", letter.pk), {"as_is": "1"})
        assert response.status_code == 302
        letter.refresh_from_db()
        new = letter.replayed_job
        assert (new.name, new.task_backend, new.args) == (letter.name, "default", [2, 3])
