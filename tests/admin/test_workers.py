"""The dashboard's workers table: read-only, from the same stats as jobstats and the view."""

from __future__ import annotations

import pytest
from django.test import override_settings

from ..conftest import worker_row
from .conftest import url

pytestmark = pytest.mark.django_db


def test_the_dashboard_lists_the_workers_with_their_stuck_handlers(viewer) -> None:
    worker_row("live-a", stuck=2, running=3)
    worker_row("lost-c", seconds_ago=600, stuck=7)
    response = viewer.get(url("dashboard"))
    assert response.status_code == 200
    rows = {w["worker_id"]: w for w in response.context["workers"]}
    assert (rows["live-a"]["running"], rows["live-a"]["stuck"]) == (3, 2)
    assert rows["live-a"]["host"] == "host-a (pid 4321)"
    assert rows["lost-c"]["lost"]
    assert rows["lost-c"]["last_seen"].endswith("(lost)")
    assert response.context["stuck"] == 2
    # Red by the dashboard's default (any stuck handler), the setting named in the tooltip.
    assert rows["live-a"]["stuck_title"] == (
        "over 0 (dashboard default: LEASEJOBS_HEALTH_MAX_STUCK is not set)"
    )
    assert rows["lost-c"]["stuck_title"] == ""  # a lost worker's count is old news
    page = response.content.decode()
    assert 'id="leasejobs-workers"' in page
    assert page.count('class="leasejobs-overdue"') == 2  # live-a's stuck, lost-c's last seen
    assert "<form" not in page.split('id="leasejobs-workers"')[1].split("</table>")[0]


@override_settings(LEASEJOBS_HEALTH_MAX_STUCK=5)
def test_stuck_handlers_within_the_setting_are_not_red(viewer) -> None:
    worker_row("live-a", stuck=2)
    response = viewer.get(url("dashboard"))
    assert response.context["workers"][0]["stuck_title"] == ""


def test_no_worker(viewer) -> None:
    response = viewer.get(url("dashboard"))
    assert response.context["workers"] == []
    assert "No worker is running" in response.content.decode()
