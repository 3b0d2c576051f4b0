"""The dashboard page: per-queue numbers from stats.collect(), linked from the app index."""

from __future__ import annotations

import io
import re

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.dialects import counting
from django_leasejobs.models import DeadLetter

from .conftest import staff_client, url

pytestmark = pytest.mark.django_db


def cells(response, queue: str) -> dict[str, str]:
    columns = [
        "pending",
        "due",
        "running",
        "failed",
        "oldest_due_age",
        "dead_last_hour",
        "dead_last_day",
        "expired_leases",
    ]
    row = next(r for r in response.context["rows"] if r["queue"] == queue)
    assert [c["field"] for c in row["cells"]] == columns
    return {c["field"]: c["text"] for c in row["cells"]}


def test_per_queue_numbers(viewer, make_due, expire_lease, dead_letter) -> None:
    dead_letter()
    due = jobs.noop.enqueue()
    make_due(due, seconds_ago=300)
    jobs.noop.enqueue(delay=3600)
    jobs.other_queue.enqueue()
    running = protocol.claim("w", batch=1, queues=["other"])
    expire_lease(*running)
    response = viewer.get(url("dashboard"))
    assert response.status_code == 200
    default = cells(response, "default")
    assert default["pending"] == "2"
    assert default["due"] == "1"
    assert default["oldest_due_age"].startswith("5 min")
    assert (default["dead_last_hour"], default["dead_last_day"]) == ("1", "1")
    other = cells(response, "other")
    assert (other["running"], other["expired_leases"]) == ("1", "1")
    page = response.content.decode()
    assert f"{url('job_changelist')}?queue=other" in page
    # highlighted: the default queue's age (> 60 s) and dead letter, the other's expired lease
    assert page.count('class="leasejobs-overdue"') == 3


def red(response) -> dict[tuple[str, str], str]:
    """(queue, field) -> title of every highlighted cell, checked against the page's markup."""
    found = {
        (row["queue"], cell["field"]): cell["title"]
        for row in response.context["rows"]
        for cell in row["cells"]
        if cell["alert"]
    }
    page = response.content.decode()
    assert page.count('class="leasejobs-overdue"') == len(found)
    for title in found.values():
        assert f'title="{title}"' in page
    return found


def stalled(queue: str, seconds_ago: float, make_due) -> None:
    make_due(jobs.noop.enqueue(queue=queue), seconds_ago=seconds_ago)


def expired(queue: str, count: int, expire_lease) -> None:
    for _ in range(count):
        jobs.noop.enqueue(queue=queue)
    expire_lease(*protocol.claim("w", batch=count, queues=[queue]))


def test_counts_past_the_cap_say_they_are_estimates_or_bounds(viewer, monkeypatch) -> None:
    monkeypatch.setattr(counting, "CAP", 2)
    for _ in range(3):
        jobs.noop.enqueue(delay=3600)
    response = viewer.get(url("dashboard"))
    pending = cells(response, "default")["pending"]
    if connection.vendor == "postgresql":
        assert pending.startswith("~")
    else:
        assert pending == "2+"
    row = next(r for r in response.context["rows"] if r["queue"] == "default")
    (cell,) = [c for c in row["cells"] if c["field"] == "pending"]
    assert "over 2 rows" in cell["title"]
    assert cells(response, "default")["due"] == "0"  # exact below the cap


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=300, LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_oldest_due_age_is_red_over_the_setting(viewer, make_due, dead_letter) -> None:
    dead_letter()  # first: it claims whichever job is due
    stalled("under", 280, make_due)
    stalled("over", 320, make_due)
    assert red(viewer.get(url("dashboard"))) == {
        ("over", "oldest_due_age"): "over LEASEJOBS_HEALTH_MAX_DUE_AGE (300 s)",
        # the settings left at None keep the dashboard's own rule
        ("default", "dead_last_hour"): (
            "over 0 (dashboard default: LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR is not set)"
        ),
    }


@override_settings(LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR=1, LEASEJOBS_HEALTH_MAX_EXPIRED_LEASES=1)
def test_counts_are_red_only_when_strictly_over_the_setting(
    viewer, dead_letter, expire_lease
) -> None:
    dead_letter()
    expired("one", 1, expire_lease)
    expired("two", 2, expire_lease)
    assert red(viewer.get(url("dashboard"))) == {
        ("two", "expired_leases"): "over LEASEJOBS_HEALTH_MAX_EXPIRED_LEASES (1)"
    }
    dead_letter()
    assert red(viewer.get(url("dashboard")))[("default", "dead_last_hour")] == (
        "over LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR (1)"
    )


def test_without_settings_a_minute_and_any_count_are_red(
    viewer, make_due, expire_lease, dead_letter
) -> None:
    dead_letter()
    stalled("under", 50, make_due)
    stalled("over", 70, make_due)
    expired("lost", 1, expire_lease)
    assert red(viewer.get(url("dashboard"))) == {
        ("over", "oldest_due_age"): (
            "over 60 s (dashboard default: LEASEJOBS_HEALTH_MAX_DUE_AGE is not set); "
            # on by default: no worker runs in this test
            "no live worker serves this queue, due jobs waiting over "
            "LEASEJOBS_HEALTH_MAX_UNSERVED_AGE (60 s)"
        ),
        ("lost", "expired_leases"): (
            "over 0 (dashboard default: LEASEJOBS_HEALTH_MAX_EXPIRED_LEASES is not set)"
        ),
        ("default", "dead_last_hour"): (
            "over 0 (dashboard default: LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR is not set)"
        ),
    }


CHECKJOBS_METRICS = {
    "the oldest due job": "oldest_due_age",
    "went dead": "dead_last_hour",
    "expired lease": "expired_leases",
    "no live worker serves": "unserved",
}


def checkjobs_problems() -> set[tuple[str, str]]:
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("checkjobs", stdout=out)
    found = set()
    for queue, message in re.findall(r"^UNHEALTHY queue '([^']+)': (.*)$", out.getvalue(), re.M):
        (metric,) = [m for phrase, m in CHECKJOBS_METRICS.items() if phrase in message]
        found.add((queue, metric))
    return found


@override_settings(
    LEASEJOBS_HEALTH_MAX_DUE_AGE=300,
    LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR=1,
    LEASEJOBS_HEALTH_MAX_EXPIRED_LEASES=0,
)
def test_red_exactly_where_checkjobs_and_the_health_view_report(
    viewer, make_due, expire_lease, dead_letter
) -> None:
    dead_letter()
    dead_letter()
    DeadLetter.objects.filter(pk=dead_letter().pk).update(queue="mail")  # one: not over 1
    stalled("stalled", 600, make_due)
    stalled("fresh", 100, make_due)
    expired("lost", 1, expire_lease)
    health = viewer.get("/jobs/health/")  # staff who may view jobs see the problems
    assert health.status_code == 503
    reported = {(p["queue"], p["metric"]) for p in health.json()["problems"]}
    assert reported == {
        ("stalled", "oldest_due_age"),
        # No worker runs here: due jobs waiting past LEASEJOBS_HEALTH_MAX_UNSERVED_AGE's 60 s.
        ("stalled", "unserved"),
        ("fresh", "unserved"),
        ("lost", "expired_leases"),
        ("default", "dead_last_hour"),
    }
    # An unserved queue has no column of its own: its oldest due age is red, saying why.
    shown = {(queue, "oldest_due_age" if m == "unserved" else m) for queue, m in reported}
    highlighted = red(viewer.get(url("dashboard")))
    assert set(highlighted) == shown
    assert highlighted[("fresh", "oldest_due_age")] == (
        "no live worker serves this queue, due jobs waiting over "
        "LEASEJOBS_HEALTH_MAX_UNSERVED_AGE (60 s)"
    )
    assert checkjobs_problems() == reported


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE="60s")
def test_a_bad_setting_raises_what_checkjobs_and_the_health_view_raise(
    viewer, client: Client
) -> None:
    messages = []
    for face in (
        lambda: viewer.get(url("dashboard")),
        lambda: client.get("/jobs/health/"),
        lambda: call_command("checkjobs", stdout=io.StringIO()),
    ):
        with pytest.raises(ImproperlyConfigured) as info:
            face()
        messages.append(str(info.value))
    assert messages == ["LEASEJOBS_HEALTH_MAX_DUE_AGE must be a number, not '60s'."] * 3


def test_empty(viewer) -> None:
    response = viewer.get(url("dashboard"))
    assert response.status_code == 200
    assert "No queue holds a live job" in response.content.decode()


def test_linked_from_the_app_index_and_the_job_list(viewer) -> None:
    page = viewer.get("/admin/django_leasejobs/").content.decode()
    assert f'href="{url("dashboard")}"' in page
    assert f'href="{url("dashboard")}"' in viewer.get(url("job_changelist")).content.decode()


def test_needs_the_permission_to_view_jobs(db) -> None:
    client = staff_client("letters-only", ["view_deadletter"])
    assert client.get(url("dashboard")).status_code == 403
    assert url("dashboard") not in client.get("/admin/django_leasejobs/").content.decode()
