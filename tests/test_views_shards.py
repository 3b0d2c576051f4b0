"""The health view with several queue databases: the verdict covers every one, a monitor's
answer names each problem's database and gives each database's numbers under ``databases``,
and an anonymous request still gets the verdict alone.

Two real databases of the test run's engine: ``default`` and ``shard`` (testproject's settings).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client, override_settings
from testapp import jobs

from django_leasejobs.models import Job

from .management.commands.test_monitoring_shards import due, report, unreadable
from .test_views import TOKEN, URL, bearer

pytestmark = pytest.mark.django_db(databases=["default", "shard"])

BOTH = pytest.mark.django_db(databases=["default", "shard"], transaction=True)


@pytest.fixture(autouse=True)
def shards() -> Iterator[None]:
    with override_settings(
        LEASEJOBS_QUEUE_DATABASES={"reports": "shard"},
        LEASEJOBS_HEALTH_MAX_DUE_AGE=300,
        LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None,
        LEASEJOBS_MONITORING_TOKEN=TOKEN,
    ):
        yield


def monitor(client: Client, **query: str) -> tuple[int, dict]:
    response = client.get(URL, query, **bearer(TOKEN))
    return response.status_code, response.json()


def test_a_stalled_queue_in_a_shard_turns_the_verdict_unhealthy(client: Client) -> None:
    stalled = report()
    due(stalled, seconds_ago=900)
    due(jobs.noop.enqueue(), seconds_ago=5)

    anonymous = client.get(URL)
    assert anonymous.status_code == 503
    assert anonymous.json() == {"status": "unhealthy"}
    assert b"shard" not in anonymous.content

    status, body = monitor(client)
    assert status == 503
    (problem,) = body["problems"]
    assert (problem["database"], problem["queue"]) == ("shard", "reports")
    assert problem["metric"] == "oldest_due_age"
    assert problem["message"].startswith("[shard] queue 'reports': the oldest due job has waited")
    assert set(body) == {"status", "problems", "thresholds", "total", "stuck", "databases"}
    assert list(body["databases"]) == ["default", "shard"]
    assert list(body["databases"]["default"]["queues"]) == ["default"]
    assert body["databases"]["shard"]["queues"]["reports"]["due"] == 1
    assert body["total"]["due"] == 2
    assert body["thresholds"]["max_due_age"] == 300

    assert monitor(client, queue="default")[0] == 200
    assert monitor(client, queue="reports")[0] == 503

    Job.objects.using("shard").filter(pk=stalled.pk).delete()
    assert client.get(URL).json() == {"status": "ok"}
    status, body = monitor(client)
    assert (status, body["status"], body["problems"]) == (200, "ok", [])


def test_with_one_database_the_answer_has_no_database_in_it(client: Client) -> None:
    with override_settings(LEASEJOBS_QUEUE_DATABASES={"reports": "default"}):
        due(jobs.noop.using(queue="reports").enqueue(), seconds_ago=900)
        status, body = monitor(client)
    assert status == 503
    assert "databases" not in body
    (problem,) = body["problems"]
    assert "database" not in problem
    assert problem["message"].startswith("queue 'reports': ")
    assert body["queues"]["reports"]["due"] == 1


@override_settings(LEASEJOBS_READ_DATABASES={"shard": "shard"})
def test_a_monitor_s_numbers_say_each_database_s_replica(client: Client) -> None:
    report()
    status, body = monitor(client)
    assert status == 200
    assert body["databases"]["shard"]["read_from"]["database"] == "shard"
    assert "read_from" not in body["databases"]["default"]


@BOTH
def test_a_shard_that_cannot_be_read_is_unhealthy_and_the_others_still_show(
    client: Client,
) -> None:
    jobs.noop.enqueue(queue="mail")
    with unreadable("shard"):
        anonymous = client.get(URL)
        status, body = monitor(client)
    assert anonymous.status_code == 503
    assert anonymous.json() == {"status": "unhealthy"}
    assert status == 503
    (problem,) = body["problems"]
    assert (problem["database"], problem["metric"]) == ("shard", "unreadable")
    assert problem["message"] == "[shard] cannot read the jobs table"
    assert body["databases"]["shard"] == {"error": "cannot read the jobs table"}
    assert body["databases"]["default"]["queues"]["mail"]["pending"] == 1
    assert client.get(URL).status_code == 200  # the table is back
