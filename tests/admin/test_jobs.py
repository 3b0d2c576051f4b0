"""The job admin: list, filters, search, detail, and the cancel / run now / retry actions."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.db import connection
from django.utils.html import escape
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.dialects import counting
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome

from .conftest import SCRIPT, claim, url

pytestmark = pytest.mark.django_db


def status(job: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def logged(job: Job, text: str) -> bool:
    return LogEntry.objects.filter(
        object_id=str(job.pk), action_flag=CHANGE, change_message__contains=text
    ).exists()


class TestList:
    def test_columns_and_overdue_marker(self, admin_client, make_due) -> None:
        due = jobs.add.enqueue(1, 2)
        make_due(due, seconds_ago=600)
        later = jobs.add.enqueue(3, 4, delay=3600)
        page = admin_client.get(url("job_changelist")).content.decode()
        assert "testapp.jobs.add" in page
        assert page.count('leasejobs-overdue"') == 1  # the due job only, not the later one
        assert "overdue 10 min" in page
        assert f"{later.attempt}/{later.max_attempts}" in page
        assert "(3, 4)" in page
        assert "(1, 2)" in page

    def test_the_count_stops_at_the_cap(self, admin_client, monkeypatch) -> None:
        monkeypatch.setattr(counting, "CAP", 3)
        for _ in range(3):
            jobs.noop.enqueue()
        exact = admin_client.get(url("job_changelist"))
        assert exact.context["cl"].result_count == 3
        assert "leasejobs-approximate" not in exact.content.decode()
        jobs.noop.enqueue()
        for query in ({}, {"q": "noop"}, {"status__exact": "pending"}):
            response = admin_client.get(url("job_changelist"), query)
            counted = response.context["cl"].paginator.counted
            assert not counted.exact
            page = response.content.decode()
            why, text = escape(counted.why()), counted.text()
            assert f'class="leasejobs-approximate" title="{why}">{text}' in page
            if connection.vendor != "postgresql":
                assert counted.text() == "3+"
            assert len(response.context["cl"].result_list) == 4  # the rows are all shown

    def test_the_action_checkbox_is_djangos_markup(self, admin_client) -> None:
        from django.contrib import admin

        job = jobs.noop.enqueue()
        model_admin = admin.site._registry[Job]
        ours = model_admin.action_checkbox(job)
        assert ours == admin.ModelAdmin.action_checkbox(model_admin, job)
        assert ours in admin_client.get(url("job_changelist")).content.decode()

    def test_large_arguments_are_truncated_in_the_list(self, admin_client) -> None:
        jobs.record.enqueue(label="x" * 5000)
        page = admin_client.get(url("job_changelist")).content.decode()
        assert "x" * 200 not in page
        assert "x" * 50 + "\u2026" in page

    def test_filters(self, admin_client) -> None:
        pending = jobs.add.enqueue(1, 2)
        other = jobs.other_queue.enqueue()
        Job.objects.filter(pk=other.pk).update(status=Status.CANCELLED)
        base = url("job_changelist")
        for query, shown, hidden in [
            ("?status__exact=cancelled", other, pending),
            ("?queue=other", other, pending),
            ("?name=testapp.jobs.add", pending, other),
            ("?schedule__isnull=True", pending, None),
        ]:
            response = admin_client.get(base + query)
            assert response.status_code == 200, query
            ids = [j.pk for j in response.context["cl"].result_list]
            assert shown.pk in ids, query
            if hidden is not None:
                assert hidden.pk not in ids, query

    @pytest.mark.parametrize(
        "query",
        [
            "queue=%00",
            "name=%00",
            "status__exact=%00",
            "status=%00",
            "dedupe_key=%00",
            "name=testapp.jobs.add&queue=de%00fault",
        ],
    )
    def test_a_nul_in_a_filter_is_an_invalid_lookup(self, admin_client, query) -> None:
        # No name holds one, and PostgreSQL's driver cannot send one (a 500 there): Django's
        # answer to a lookup it cannot make, the list unfiltered, flagged ?e=1.
        jobs.noop.enqueue()
        response = admin_client.get(f"{url('job_changelist')}?{query}")
        assert response.status_code == 302
        assert response["Location"] == f"{url('job_changelist')}?e=1"

    def test_filter_choices_come_from_the_registry_and_the_indexes(self, admin_client) -> None:
        live = jobs.noop.enqueue(queue="live-only")
        done = jobs.noop.enqueue(queue="finished-only")
        Job.objects.filter(pk=done.pk).update(status=Status.SUCCEEDED, name="gone.job")
        response = admin_client.get(url("job_changelist"))
        choices = {
            spec.title: [c["display"] for c in spec.choices(response.context["cl"])]
            for spec in response.context["cl"].filter_specs
        }
        assert "live-only" in choices["queue"]
        assert "other" in choices["queue"]  # testapp.jobs.other_queue's queue
        assert "finished-only" not in choices["queue"]  # never a scan of finished rows
        assert "testapp.jobs.add" in choices["job name"]
        # Names of every row, finished ones too: a skip scan of leasejobs_name (the plan:
        # test_job_search.py).
        assert "gone.job" in choices["job name"]
        by_url = admin_client.get(url("job_changelist"), {"name": "gone.job"})
        assert [j.pk for j in by_url.context["cl"].result_list] == [done.pk]
        by_queue = admin_client.get(url("job_changelist"), {"queue": "live-only"})
        assert [j.pk for j in by_queue.context["cl"].result_list] == [live.pk]

    @pytest.mark.parametrize("field", ["id", "name", "dedupe"])
    def test_search(self, admin_client, field) -> None:
        wanted = jobs.record.enqueue(dedupe_key="invoice-77")
        jobs.noop.enqueue()
        term = {"id": str(wanted.pk), "name": "record", "dedupe": "invoice-77"}[field]
        response = admin_client.get(url("job_changelist"), {"q": term})
        assert [j.pk for j in response.context["cl"].result_list] == [wanted.pk]

    def test_search_for_words_on_the_id_column_is_not_an_error(self, admin_client) -> None:
        jobs.noop.enqueue()
        response = admin_client.get(url("job_changelist"), {"q": "noop"})
        assert response.status_code == 200
        assert len(response.context["cl"].result_list) == 1

    def test_rows_are_never_edited_through_a_form(self, admin_client) -> None:
        job = jobs.add.enqueue(1, 2)
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert 'name="_save"' not in page
        response = admin_client.post(url("job_change", job.pk), {"status": "succeeded"})
        assert response.status_code == 403
        assert admin_client.get(url("job_add")).status_code == 403
        assert status(job) == Status.PENDING


class TestDetail:
    def test_limits_are_shown(self, admin_client) -> None:
        job = jobs.limited_both.enqueue(42)
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert "customer:42" in page
        assert "4 starts per 60 s" in page
        plain = admin_client.get(url("job_change", jobs.noop.enqueue().pk)).content.decode()
        assert "starts per" not in plain

    def test_the_fair_key_and_weight_are_shown(self, admin_client) -> None:
        job = jobs.per_account.using(fair_weight=3).enqueue("acme")
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert "Limits and fairness" in page
        assert "account:acme" in page
        # The weight's own row, its help text between label and value on Django 6.
        assert re.search(r'field-fair_weight">.*?<div class="readonly">3</div>', page, re.S)

    def test_search_by_concurrency_key(self, admin_client) -> None:
        wanted = jobs.per_customer.enqueue(5)
        jobs.per_customer.enqueue(6)
        response = admin_client.get(url("job_changelist"), {"q": "customer:5"})
        assert [j.pk for j in response.context["cl"].result_list] == [wanted.pk]

    def test_arguments_history_and_result(self, admin_client, failed_job) -> None:
        job = failed_job(error="RuntimeError: first", traceback="Traceback (most recent call)")
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert "attempt history" in page.lower()
        assert "RuntimeError: first" in page
        assert "Traceback (most recent call)" in page
        assert "admin-test-worker" in page

    def test_a_long_history_says_how_many_attempts_it_dropped(self, admin_client, make_due):
        """On the job's page and its dead letter's: the kept attempts, and the count between."""
        job = jobs.noop.enqueue(max_attempts=30)
        for _ in range(30):
            make_due(job)
            running = claim(job)
            protocol.fail(job.pk, running.attempt, Failure(f"E: attempt {running.attempt}"))
        letter = DeadLetter.objects.get(job=job)
        for page_url in (url("job_change", job.pk), url("deadletter_change", letter.pk)):
            page = admin_client.get(page_url).content.decode()
            assert "7 attempts between these not kept" in page, page_url
            shown = [n for n in range(1, 31) if f">E: attempt {n}</pre>" in page]
            assert shown == [1, 2, 3, *range(11, 31)], page_url

    def test_arguments_are_pretty_json(self, admin_client) -> None:
        job = jobs.record.enqueue(label="hello")
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert "{\n  &quot;label&quot;: &quot;hello&quot;\n}" in page

    def test_script_in_arguments_and_traceback_is_escaped(
        self, admin_client, failed_job, dead_letter
    ) -> None:
        job = jobs.record.enqueue(label=SCRIPT)
        failed = failed_job(error=SCRIPT, traceback=f"Traceback {SCRIPT}")
        for page_url in (
            url("job_changelist"),
            url("job_change", job.pk),
            url("job_change", failed.pk),
        ):
            page = admin_client.get(page_url).content.decode()
            assert "<script>alert" not in page, page_url
        page = admin_client.get(url("job_change", failed.pk)).content.decode()
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page

    def test_buttons_match_the_state(self, admin_client, failed_job) -> None:
        pending = jobs.noop.enqueue(delay=60)
        page = admin_client.get(url("job_change", pending.pk)).content.decode()
        assert 'id="leasejobs-cancel"' in page
        assert 'id="leasejobs-run-now"' in page
        assert 'id="leasejobs-retry"' not in page
        failed = failed_job()
        page = admin_client.get(url("job_change", failed.pk)).content.decode()
        assert 'id="leasejobs-retry"' in page
        assert 'id="leasejobs-run-now"' not in page
        running = claim(jobs.noop.enqueue())
        page = admin_client.get(url("job_change", running.pk)).content.decode()
        assert 'id="leasejobs-cancel"' in page  # asks its worker to cancel it
        assert 'id="leasejobs-run-now"' not in page
        assert 'id="leasejobs-retry"' not in page
        assert "cancel requested" not in page


class TestButtons:
    def test_cancel_a_pending_job(self, operator) -> None:
        job = jobs.noop.enqueue(delay=60)
        response = operator.post(url("job_cancel", job.pk))
        assert response.status_code == 302
        assert status(job) == Status.CANCELLED
        assert logged(job, f"Job #{job.pk}: cancelled.")

    def test_cancel_a_running_job_asks_its_worker_and_the_pages_say_so(self, operator) -> None:
        job = claim(jobs.noop.enqueue())
        response = operator.post(url("job_cancel", job.pk), follow=True)
        texts = [str(m) for m in response.context["messages"]]
        assert f"Job #{job.pk}: cancel requested." in texts
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.cancel_requested_at is not None) == (Status.RUNNING, True)
        assert logged(job, f"Job #{job.pk}: cancel requested.")
        assert "(cancel requested)" in operator.get(url("job_changelist")).content.decode()
        page = operator.get(url("job_change", job.pk)).content.decode()
        assert "its worker will end the attempt" in page
        assert protocol.cancel_attempt(job.pk, job.attempt) is Outcome.CANCELLED
        assert "(cancel requested)" not in operator.get(url("job_changelist")).content.decode()
        page = operator.get(url("job_change", job.pk)).content.decode()
        assert "cancel requested at" in page
        assert "its worker will end the attempt" not in page

    def test_cancel_a_failed_job(self, operator, failed_job) -> None:
        job = failed_job()
        operator.post(url("job_cancel", job.pk))
        assert status(job) == Status.CANCELLED

    def test_run_now_makes_a_pending_job_due(self, operator, run_due) -> None:
        job = jobs.add.enqueue(2, 3, delay=3600)
        assert run_due() == []
        operator.post(url("job_run_now", job.pk))
        assert [(j.pk, j.status, j.result) for j in run_due()] == [(job.pk, "succeeded", 5)]
        assert logged(job, "made due now")

    def test_retry_a_failed_job_now(self, operator, failed_job, run_due) -> None:
        job = failed_job()
        assert run_due() == []
        operator.post(url("job_retry", job.pk))
        assert [(j.pk, j.status, j.attempt) for j in run_due()] == [(job.pk, "succeeded", 2)]
        assert logged(job, "retried now")

    @pytest.mark.parametrize(
        ("slug", "state"),
        [
            ("cancel", "succeeded"),
            ("cancel", "dead"),
            ("run_now", "running"),
            ("run_now", "dead"),
            ("retry", "pending"),
            ("retry", "running"),
        ],
    )
    def test_wrong_state_is_refused_with_a_message(self, operator, slug, state) -> None:
        job = jobs.noop.enqueue()
        if state == "running":
            claim(job)
        elif state != "pending":
            Job.objects.filter(pk=job.pk).update(status=state)
        before = Job.objects.values().get(pk=job.pk)
        response = operator.post(url(f"job_{slug}", job.pk), follow=True)
        texts = [str(m) for m in response.context["messages"]]
        assert any(f"Job #{job.pk} is {state}: only" in t for t in texts), texts
        assert Job.objects.values().get(pk=job.pk) == before
        assert not LogEntry.objects.filter(object_id=str(job.pk)).exists()

    def test_get_is_not_allowed(self, operator) -> None:
        job = jobs.noop.enqueue(delay=60)
        assert operator.get(url("job_cancel", job.pk)).status_code == 405
        assert status(job) == Status.PENDING

    def test_unknown_job(self, operator) -> None:
        assert operator.post(url("job_cancel", 999999)).status_code == 404
        assert operator.post("/admin/django_leasejobs/job/abc/cancel/").status_code == 404
        # Past the largest key, more digits than int() reads, a digit int() refuses.
        for job_id in (str(2**63), "9" * 4301, "\u00b2"):
            assert operator.post(f"/admin/django_leasejobs/job/{job_id}/cancel/").status_code == 404


class TestBulkActions:
    def post(self, client, action: str, *jobs_: Job):
        return client.post(
            url("job_changelist"),
            {"action": action, "_selected_action": [j.pk for j in jobs_]},
            follow=True,
        )

    def test_cancel_selected_cancels_waiting_asks_running_and_refuses_finished(
        self, operator
    ) -> None:
        first, second, third = jobs.noop.enqueue(delay=60), jobs.noop.enqueue(), jobs.noop.enqueue()
        running = claim(second)
        Job.objects.filter(pk=third.pk).update(status=Status.SUCCEEDED)
        response = self.post(operator, "cancel_jobs", first, running, third)
        texts = [str(m) for m in response.context["messages"]]
        assert "Cancelled: 1 job(s)." in texts
        assert "Cancel requested: 1 job(s)." in texts
        assert f"Job #{third.pk} is succeeded: only pending or failed or running jobs" in " ".join(
            texts
        )
        assert (status(first), status(running)) == (Status.CANCELLED, Status.RUNNING)
        assert logged(first, "Cancelled")
        assert logged(running, "Cancel requested")
        assert not logged(third, "Cancelled")

    def test_run_selected_now_and_retry_selected_now(self, operator, failed_job, run_due) -> None:
        pending = jobs.add.enqueue(1, 1, delay=3600)
        failed = failed_job()
        response = self.post(operator, "retry_jobs_now", pending, failed)
        texts = [str(m) for m in response.context["messages"]]
        assert f"Job #{pending.pk} is pending: only failed jobs can be retried now." in texts
        assert [j.pk for j in run_due()] == [failed.pk]
        self.post(operator, "run_jobs_now", pending)
        assert [j.pk for j in run_due()] == [pending.pk]


def _field_row(page: str, label: str) -> str:
    """The admin page's row of the field ``label``: from its label to the next field's row
    (Django 6.1 puts the help text between them, so no fixed window fits every version)."""
    return page.split(f">{label}:</label>")[1].split('class="form-row')[0]


def test_the_detail_shows_a_snoozed_jobs_snoozes(admin_client) -> None:
    job = jobs.noop.enqueue()
    claimed = claim(job)
    assert protocol.snooze(job.pk, claimed.attempt, 60.0, max_snoozes=5) is Outcome.SNOOZED
    page = admin_client.get(url("job_change", job.pk)).content.decode()
    assert '<div class="readonly">1</div>' in _field_row(page, "Snoozes")


def test_the_detail_shows_a_deferred_jobs_deferrals(admin_client) -> None:
    job = Job.objects.create(name="shop.release2.ship")
    claimed = claim(job)
    failure = Failure("No job is registered as 'shop.release2.ship'.", kind="unregistered job")
    outcome = protocol.defer(
        job.pk,
        claimed.attempt,
        failure,
        deferrals=0,
        grace=dt.timedelta(hours=1),
        worker_id="w1",
        reason="not registered",
    )
    assert outcome is Outcome.RELEASED
    page = admin_client.get(url("job_change", job.pk)).content.decode()
    assert '<div class="readonly">1</div>' in _field_row(page, "Deferrals")
    assert "First deferred at" in page


class TestProgress:
    def report(self, job: Job, done: float, total: float | None, message: str) -> None:
        running = claim(job)
        protocol.record_progress(
            job.pk, running.attempt, protocol.progress_update(done, total, message)
        )

    def test_the_job_page_shows_a_bar_with_its_figures_and_escaped_message(
        self, admin_client
    ) -> None:
        job = jobs.add.enqueue(1, 2)
        self.report(job, 3, 8, SCRIPT)
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert '<progress class="leasejobs-progress" value="3" max="8">' in page
        assert "3 / 8 (37%)" in page
        assert escape(SCRIPT) in page
        assert SCRIPT not in page
        at = Job.objects.get(pk=job.pk).progress["at"]
        assert f"at {at}" in page

    def test_an_unknown_total_is_a_bar_without_a_value(self, admin_client) -> None:
        job = jobs.add.enqueue(1, 2)
        self.report(job, 12, None, "")
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert '<progress class="leasejobs-progress">12 done</progress>' in page

    def test_the_list_has_a_percent_column(self, admin_client) -> None:
        quiet = jobs.add.enqueue(1, 2)
        busy = jobs.add.enqueue(3, 4, priority=10)  # claimed first
        self.report(busy, 1, 4, "a quarter")
        page = admin_client.get(url("job_changelist")).content.decode()
        assert '<td class="field-progress_column">25%</td>' in page
        assert page.count('class="field-progress_column"') == 2
        assert Job.objects.get(pk=quiet.pk).progress is None

    def test_a_job_without_progress_shows_a_dash(self, admin_client) -> None:
        job = jobs.add.enqueue(1, 2)
        page = admin_client.get(url("job_change", job.pk)).content.decode()
        assert "leasejobs-progress" not in page
