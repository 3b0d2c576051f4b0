"""The dashboard page: per-queue numbers from stats.collect(), linked from the app index."""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs import lifecycle

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
    running = lifecycle.claim("w", batch=1, queues=["other"])
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
