"""The job page's logs: by attempt, a failed attempt's error next to its own logs, escaped."""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.protocol import Failure
from django_leasejobs.upkeep import AttemptLogs, store_logs

from .conftest import SCRIPT, claim, staff_client, url

pytestmark = pytest.mark.django_db


def record(message: str, level: str = "INFO") -> dict[str, str]:
    return {"level": level, "logger": "shop", "message": message, "at": "2026-01-01T00:00:00Z"}


def test_logs_by_attempt_with_the_failed_attempt_s_error(admin_client, make_due) -> None:
    job = jobs.noop.enqueue(max_attempts=3)
    running = claim(job)
    protocol.fail(job.pk, running.attempt, Failure("RuntimeError: attempt one broke"))
    store_logs([AttemptLogs(job.pk, 1, [record("starting one"), {"dropped": 2}], 10)])
    make_due(job)
    running = claim(job)
    protocol.complete(job.pk, running.attempt)
    store_logs([AttemptLogs(job.pk, 2, [record("all done", "WARNING")], 10)])
    page = admin_client.get(url("job_change", job.pk)).content.decode()
    one, two = page.index("<h3>Attempt 1</h3>"), page.index("<h3>Attempt 2</h3>")
    first = page[one:two]
    assert "RuntimeError: attempt one broke" in first  # the error beside its attempt's logs
    assert "starting one" in first
    assert "2 records dropped here by the caps" in first
    second = page[two:]
    assert "all done" in second
    assert "WARNING" in second
    assert "Failed (" not in second


def test_a_job_without_logs_says_so_and_a_view_only_user_sees_them(admin_client) -> None:
    quiet, logged = jobs.noop.enqueue(), jobs.noop.enqueue()
    store_logs([AttemptLogs(logged.pk, 1, [record("seen")], 10)])
    assert "No logs kept" in admin_client.get(url("job_change", quiet.pk)).content.decode()
    viewer = staff_client("viewer", ["view_job"])
    assert "seen" in viewer.get(url("job_change", logged.pk)).content.decode()


def test_a_message_is_escaped(admin_client) -> None:
    job = jobs.noop.enqueue()
    store_logs([AttemptLogs(job.pk, 1, [record(SCRIPT)], 10)])
    page = admin_client.get(url("job_change", job.pk)).content.decode()
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
