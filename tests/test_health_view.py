"""The JSON health view: 503 while a threshold is passed, 200 otherwise, 400 for bad input."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test import Client, override_settings
from django.urls import reverse
from testapp import jobs

from django_leasejobs import execution, lifecycle

pytestmark = pytest.mark.django_db

URL = "/jobs/health/"


def drain() -> None:
    while claimed := lifecycle.claim("drainer", batch=10):
        for job in claimed:
            execution.run(job, "drainer")


def test_the_url_is_namespaced() -> None:
    assert reverse("leasejobs:health") == URL
    assert reverse("leasejobs:metrics") == "/jobs/metrics/"


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60)
def test_503_while_a_queue_is_stalled_then_200_once_drained(client: Client, make_due) -> None:
    make_due(jobs.noop.enqueue(queue="mail"), jobs.noop.enqueue(queue="mail"), seconds_ago=3600)

    response = client.get(URL)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["thresholds"] == {
        "max_due_age": 60.0,
        "max_dead_per_hour": None,
        "max_expired_leases": None,
    }
    (problem,) = body["problems"]
    assert problem["queue"] == "mail"
    assert problem["metric"] == "oldest_due_age"
    assert 3600 <= problem["value"] < 3660
    assert problem["limit"] == 60
    assert "queue 'mail': the oldest due job has waited 3600 s" in problem["message"]
    assert body["queues"]["mail"]["due"] == 2
    assert body["total"]["due"] == 2
    assert "no-cache" in response["Cache-Control"]

    drain()
    response = client.get(URL)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["problems"] == []


def test_without_thresholds_it_reports_the_numbers_and_answers_200(
    client: Client, make_due
) -> None:
    make_due(jobs.noop.enqueue(), seconds_ago=3600)
    response = client.get(URL)
    assert response.status_code == 200
    assert response.json()["queues"]["default"]["oldest_due_age"] >= 3600


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60)
def test_query_parameters_override_the_settings(client: Client, make_due) -> None:
    make_due(jobs.noop.enqueue(queue="mail"), seconds_ago=600)
    assert client.get(URL).status_code == 503
    assert client.get(URL, {"max_due_age": "15m"}).status_code == 200
    assert client.get(URL, {"queue": "default"}).status_code == 200
    assert client.get(URL, {"queue": "default,mail"}).status_code == 503


def test_expired_leases_and_dead_letters_as_query_thresholds(client: Client, expire_lease) -> None:
    jobs.permanent.enqueue()
    drain()
    jobs.noop.enqueue(queue="busy")
    (claimed,) = lifecycle.claim("w1", batch=1)
    expire_lease(claimed, seconds_ago=5)
    response = client.get(URL, {"max_dead_per_hour": "0", "max_expired_leases": "0"})
    assert response.status_code == 503
    found = {(p["queue"], p["metric"]) for p in response.json()["problems"]}
    assert found == {("default", "dead_last_hour"), ("busy", "expired_leases")}
    response = client.get(URL, {"max_dead_per_hour": "1", "max_expired_leases": "1"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"max_due_ag": "60"}, "Unknown query parameter(s) max_due_ag"),
        ({"max_due_age": "soon"}, "max_due_age: 'soon' is not a duration"),
        ({"max_due_age": "-5"}, "zero or more"),
        ({"max_dead_per_hour": "-1"}, "max_dead_per_hour must be a whole number"),
        ({"max_expired_leases": "1.5"}, "max_expired_leases must be a whole number"),
        ({"queue": "bad name"}, "queue: queue 'bad name' is not a valid queue name"),
    ],
)
def test_bad_query_parameters_get_400(client: Client, query: dict, message: str) -> None:
    response = client.get(URL, query)
    assert response.status_code == 400
    assert response.json()["status"] == "error"
    assert message in response.json()["error"]


@override_settings(LEASEJOBS_QUEUES=["default", "mail"])
def test_a_queue_outside_the_declared_list_gets_400(client: Client) -> None:
    response = client.get(URL, {"queue": "mial"})
    assert response.status_code == 400
    assert "Unknown queue(s) mial" in response.json()["error"]


def test_only_safe_methods(client: Client) -> None:
    assert client.post(URL).status_code == 405
    assert client.head(URL).status_code == 200


class Unreadable(Exception):
    """Raised to roll the renamed table back."""


def test_a_database_error_answers_503_without_its_text(client: Client, vendor: str) -> None:
    if vendor == "mysql":
        pytest.skip("MySQL commits DDL at once: renaming the table would outlive the test")
    with pytest.raises(Unreadable), transaction.atomic():
        with connection.cursor() as cursor:  # the jobs table disappears inside a savepoint
            cursor.execute("ALTER TABLE django_leasejobs_job RENAME TO leasejobs_gone")
        response = client.get(URL)
        raise Unreadable
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy", "error": "cannot read the jobs table"}
    assert client.get(URL).status_code == 200  # the table is back
