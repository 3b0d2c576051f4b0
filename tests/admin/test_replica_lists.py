"""The admin's lists and dashboard with ``LEASEJOBS_READ_DATABASES``: they say which replica they
read and how far behind it is; without the setting they say nothing and read as before.

The suite has one database, here its own replica (the setting allows it): what a list reads
where is counted per alias in tests/acceptance/test_read_replicas.py, whose project has a
replica alias of its own.
"""

from __future__ import annotations

import pytest
from django.test import override_settings
from testapp import jobs

from .conftest import url

pytestmark = pytest.mark.django_db

REPLICA = {"default": "default"}
SAID = "Read from the replica default (not a standby: its rows are current)."


def shown(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@override_settings(LEASEJOBS_READ_DATABASES=REPLICA)
@pytest.mark.parametrize("name", ["job", "deadletter", "workflowrun", "schedule"])
def test_each_list_says_which_replica_it_read(admin_client, name: str) -> None:
    jobs.noop.enqueue()
    response = admin_client.get(url(f"{name}_changelist"))
    assert response.status_code == 200
    assert SAID in shown(response)


def test_without_a_replica_a_list_says_nothing_of_one(admin_client) -> None:
    response = admin_client.get(url("job_changelist"))
    assert not [m for m in shown(response) if "replica" in m]
    response = admin_client.get(url("dashboard"))
    assert 'id="leasejobs-replica"' not in response.content.decode()


@override_settings(LEASEJOBS_READ_DATABASES=REPLICA)
def test_the_dashboard_says_which_replica_it_read(admin_client) -> None:
    response = admin_client.get(url("dashboard"))
    page = response.content.decode()
    assert f'<p id="leasejobs-replica">{SAID}</p>' in page


@override_settings(LEASEJOBS_READ_DATABASES=REPLICA)
def test_a_job_s_page_and_an_action_read_the_primary_and_say_nothing_of_a_replica(
    admin_client,
) -> None:
    job = jobs.noop.enqueue()
    page = admin_client.get(url("job_change", job.pk))
    assert not [m for m in shown(page) if "replica" in m]
    done = admin_client.post(
        url("job_changelist"),
        {"action": "cancel_jobs", "_selected_action": [job.pk]},
        follow=True,
    )
    assert done.status_code == 200
    job.refresh_from_db()
    assert job.status == "cancelled"


@override_settings(LEASEJOBS_READ_DATABASES=REPLICA)
def test_the_lease_advisor_says_which_replica_it_read(admin_client) -> None:
    response = admin_client.get(url("leases"))
    assert response.status_code == 200
    assert SAID in shown(response)
