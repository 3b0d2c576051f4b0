"""The JSON health view: 503 while a threshold is passed, 200 otherwise, 400 for bad input.

Anonymous requests get the verdict only; the numbers and queue names go to staff who may view
jobs and to the bearer token of ``LEASEJOBS_MONITORING_TOKEN``.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection, transaction
from django.test import Client, override_settings
from django.urls import reverse
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Pause
from django_leasejobs.runtime import execution

from .conftest import shifted

pytestmark = pytest.mark.django_db

URL = "/jobs/health/"
TOKEN = "tok3n-for-the-monitoring-views_0123456789abcdef"


def user_client(username: str, *, is_staff: bool, may_view_jobs: bool) -> Client:
    user = User.objects.create_user(username, is_staff=is_staff)
    if may_view_jobs:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="django_leasejobs", codename="view_job")
        )
    logged_in = Client()
    logged_in.force_login(user)
    return logged_in


@pytest.fixture
def staff() -> Client:
    """Staff who may view jobs: they see what the admin dashboard shows."""
    return user_client("monitor", is_staff=True, may_view_jobs=True)


def drain() -> None:
    while claimed := protocol.claim("drainer", batch=10):
        for job in claimed:
            execution.run(job, "drainer")


def test_the_url_is_namespaced() -> None:
    assert reverse("leasejobs:health") == URL
    assert reverse("leasejobs:metrics") == "/jobs/metrics/"


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60, LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_503_while_a_queue_is_stalled_then_200_once_drained(staff: Client, make_due) -> None:
    make_due(jobs.noop.enqueue(queue="mail"), jobs.noop.enqueue(queue="mail"), seconds_ago=3600)

    response = staff.get(URL)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["thresholds"] == {
        "max_due_age": 60.0,
        "max_dead_per_hour": None,
        "max_expired_leases": None,
        "max_paused_age": None,
        "max_stuck": None,
        "max_unserved_age": None,
        "max_unknown": None,
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
    response = staff.get(URL)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["problems"] == []


@override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_without_thresholds_it_reports_the_numbers_and_answers_200(staff: Client, make_due) -> None:
    make_due(jobs.noop.enqueue(), seconds_ago=3600)
    response = staff.get(URL)
    assert response.status_code == 200
    assert response.json()["queues"]["default"]["oldest_due_age"] >= 3600


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60, LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_query_parameters_override_the_settings(staff: Client, make_due) -> None:
    make_due(jobs.noop.enqueue(queue="mail"), seconds_ago=600)
    assert staff.get(URL).status_code == 503
    assert staff.get(URL, {"max_due_age": "15m"}).status_code == 200
    assert staff.get(URL, {"queue": "default"}).status_code == 200
    assert staff.get(URL, {"queue": "default,mail"}).status_code == 503


def test_expired_leases_and_dead_letters_as_query_thresholds(staff: Client, expire_lease) -> None:
    jobs.permanent.enqueue()
    drain()
    jobs.noop.enqueue(queue="busy")
    (claimed,) = protocol.claim("w1", batch=1)
    expire_lease(claimed, seconds_ago=5)
    response = staff.get(URL, {"max_dead_per_hour": "0", "max_expired_leases": "0"})
    assert response.status_code == 503
    found = {(p["queue"], p["metric"]) for p in response.json()["problems"]}
    assert found == {("default", "dead_last_hour"), ("busy", "expired_leases")}
    response = staff.get(URL, {"max_dead_per_hour": "1", "max_expired_leases": "1"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"max_due_ag": "60"}, "Unknown query parameter(s) max_due_ag"),
        ({"max_due_age": "soon"}, "max_due_age: 'soon' is not a duration"),
        ({"max_due_age": "-5"}, "zero or more"),
        ({"max_dead_per_hour": "-1"}, "max_dead_per_hour must be a whole number"),
        ({"max_expired_leases": "1.5"}, "max_expired_leases must be a whole number"),
        ({"max_stuck": "\u00b2"}, "max_stuck must be a whole number"),  # isdigit() says yes
        ({"max_unknown": "9" * 5000}, "max_unknown must be a whole number"),  # int() refuses
        ({"queue": "bad name"}, "queue: queue 'bad name' is not a valid queue name"),
    ],
)
def test_bad_query_parameters_get_400(staff: Client, query: dict, message: str) -> None:
    response = staff.get(URL, query)
    assert response.status_code == 400
    assert response.json()["status"] == "error"
    assert message in response.json()["error"]


@override_settings(LEASEJOBS_QUEUES=["default", "mail"])
def test_a_queue_outside_the_declared_list_gets_400(staff: Client) -> None:
    response = staff.get(URL, {"queue": "mial"})
    assert response.status_code == 400
    assert "Unknown queue(s) mial" in response.json()["error"]


def test_only_safe_methods(client: Client) -> None:
    assert client.post(URL).status_code == 405
    assert client.head(URL).status_code == 200


class Unreadable(Exception):
    """Raised to roll the renamed table back."""


def test_a_database_error_answers_503_without_its_text(staff: Client, vendor: str) -> None:
    if vendor == "mysql":
        pytest.skip("MySQL commits DDL at once: renaming the table would outlive the test")
    with pytest.raises(Unreadable), transaction.atomic():
        with connection.cursor() as cursor:  # the jobs table disappears inside a savepoint
            cursor.execute("ALTER TABLE django_leasejobs_job RENAME TO leasejobs_gone")
        response = staff.get(URL)
        raise Unreadable
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy", "error": "cannot read the jobs table"}
    assert staff.get(URL).status_code == 200  # the table is back


# --------------------------------------------------------------------------- who sees what


@pytest.fixture
def stalled(make_due) -> None:
    make_due(jobs.noop.enqueue(queue="payroll"), seconds_ago=3600)


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60, LEASEJOBS_MONITORING_TOKEN=TOKEN)
def test_anonymous_requests_get_the_verdict_only(client: Client, stalled) -> None:
    response = client.get(URL)
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy"}
    assert b"payroll" not in response.content
    drain()
    response = client.get(URL)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert client.head(URL).status_code == 200


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60)
def test_anonymous_requests_may_not_pass_query_parameters(client: Client, stalled) -> None:
    # Thresholds and queue names given by a stranger would read the numbers out one bit at a
    # time (is max_due_age=1800 passed? 2700?), and name the queues that exist.
    for query in ({"max_due_age": "2h"}, {"queue": "payroll"}, {"max_due_ag": "1"}):
        response = client.get(URL, query)
        assert response.status_code == 403
        assert response.json()["status"] == "error"
        assert "LEASEJOBS_MONITORING_TOKEN" in response.json()["error"]
        assert b"payroll" not in response.content


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60, LEASEJOBS_MONITORING_TOKEN=TOKEN)
def test_the_right_token_gets_the_numbers(client: Client, stalled) -> None:
    assert client.get(URL).json() == {"status": "unhealthy"}
    response = client.get(URL, **bearer(TOKEN))
    assert response.status_code == 503
    assert response.json()["queues"]["payroll"]["due"] == 1
    assert response.json()["problems"][0]["queue"] == "payroll"
    response = client.get(URL, {"queue": "default"}, **bearer(TOKEN))
    assert response.status_code == 200
    assert client.get(URL, HTTP_AUTHORIZATION=f"bearer  {TOKEN}").status_code == 503  # any case


@pytest.mark.parametrize("configured", [TOKEN, None], ids=["token-set", "no-token-set"])
def test_a_wrong_token_is_refused_not_downgraded(
    client: Client, stalled, configured: str | None
) -> None:
    # A scraper with a stale token must notice, not quietly get the verdict only.
    with override_settings(LEASEJOBS_MONITORING_TOKEN=configured):
        for wrong in (TOKEN[:-1], TOKEN + "x", "", "None", TOKEN.upper()):
            response = client.get(URL, **bearer(wrong))
            assert response.status_code == 401, wrong
            assert response["WWW-Authenticate"] == 'Bearer error="invalid_token"'
            assert b"payroll" not in response.content
            assert "due" not in response.json()


@override_settings(LEASEJOBS_MONITORING_TOKEN=TOKEN, LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_another_authorization_scheme_is_left_to_whoever_set_it(client: Client, stalled) -> None:
    # An HTTP Basic login of a proxy in front of the site reaches Django too: it is not ours.
    response = client.get(URL, HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_staff_who_may_view_jobs_get_the_numbers(stalled) -> None:
    looker = user_client("looker", is_staff=True, may_view_jobs=True)
    assert looker.get(URL).json()["queues"]["payroll"]["due"] == 1
    for name, is_staff, may_view_jobs in (("plain", True, False), ("customer", False, True)):
        other = user_client(name, is_staff=is_staff, may_view_jobs=may_view_jobs)
        assert other.get(URL).json() == {"status": "ok"}, name
        assert other.get(URL, {"queue": "payroll"}).status_code == 403, name


def test_anonymous_database_error_is_the_verdict_only(client: Client, vendor: str) -> None:
    if vendor == "mysql":
        pytest.skip("MySQL commits DDL at once: renaming the table would outlive the test")
    with pytest.raises(Unreadable), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE django_leasejobs_job RENAME TO leasejobs_gone")
        response = client.get(URL)
        raise Unreadable
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy"}


@override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60)
def test_a_paused_queue_is_ok_while_waiting_and_503_past_max_paused_age(
    staff: Client, make_due
) -> None:
    make_due(jobs.noop.enqueue(queue="mail"), seconds_ago=3600)
    protocol.pause(queue="mail")
    Pause.objects.update(paused_at=shifted(-7200))
    response = staff.get(URL)
    assert response.status_code == 200, response.json()
    assert response.json()["queues"]["mail"]["paused_age"] >= 7200
    response = staff.get(URL, {"max_paused_age": "1h"})
    assert response.status_code == 503
    (problem,) = response.json()["problems"]
    assert (problem["queue"], problem["metric"]) == ("mail", "paused_age")
    assert staff.get(URL, {"max_paused_age": "later"}).status_code == 400


def _fill_queues(count: int, first: int = 0) -> None:
    """A due job, a running job with an expired lease and a dead letter in each of ``count``
    queues, as an API caller who may enqueue can make them."""
    from django_leasejobs.models import DeadLetter, Job

    names = [f"made-up-{n:04}" for n in range(first, first + count)]
    Job.objects.bulk_create(
        [Job(name="testapp.jobs.noop", queue=name, run_at=shifted(-30)) for name in names]
        + [
            Job(
                name="testapp.jobs.noop",
                queue=name,
                status="running",
                attempt=1,
                lease_expires_at=shifted(-5),
            )
            for name in names
        ]
    )
    running = Job.objects.filter(status="running", queue__in=names).order_by("pk")
    DeadLetter.objects.bulk_create(
        [DeadLetter(job=job, name=job.name, queue=job.queue, reason="r") for job in running]
    )


def _anonymous_queries() -> tuple[int, int]:
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        status = Client().get(URL).status_code
    return status, len(queries.captured_queries)


@override_settings(
    LEASEJOBS_HEALTH_MAX_DUE_AGE=3600,
    LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR=5,
    LEASEJOBS_HEALTH_MAX_EXPIRED_LEASES=5,
    LEASEJOBS_HEALTH_MAX_PAUSED_AGE=3600,
    LEASEJOBS_HEALTH_MAX_STUCK=5,
)
def test_the_anonymous_verdict_costs_the_same_queries_for_1_or_1000_queues() -> None:
    _fill_queues(1)
    one = _anonymous_queries()
    _fill_queues(999, first=1)
    thousand = _anonymous_queries()
    assert one == thousand == (200, one[1])
    assert one[1] <= 8


@override_settings(
    LEASEJOBS_HEALTH_MAX_DUE_AGE=60,
    LEASEJOBS_STATS_MAX_QUEUES=3,
    LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None,
)
def test_the_detailed_view_caps_the_queues_it_counts_and_still_judges_them_all(
    staff: Client, make_due
) -> None:
    _fill_queues(10)
    make_due(jobs.noop.enqueue(queue="zz-stalled"), seconds_ago=3600)
    body = staff.get(URL).json()
    assert sorted(body["queues"]) == ["made-up-0000", "made-up-0001", "made-up-0002"]
    assert body["queues_omitted"] == 8
    assert body["total"]["approximate"]["pending"] == "at least"
    assert body["status"] == "unhealthy"
    assert [p["queue"] for p in body["problems"]] == ["zz-stalled"]
    anonymous = Client().get(URL)
    assert (anonymous.status_code, anonymous.json()) == (503, {"status": "unhealthy"})


@override_settings(LEASEJOBS_READ_DATABASES={"default": "default"})
def test_a_monitor_s_numbers_say_which_replica_they_were_read_from(
    staff: Client, client: Client
) -> None:
    # The suite's one database as its own replica; counted per alias in
    # tests/acceptance/test_read_replicas.py. A stranger's verdict reads the primary.
    body = staff.get(URL).json()
    assert body["read_from"] == {
        "database": "default",
        "standby": False,
        "lag_seconds": 0.0,
        "stale": False,
    }
    assert client.get(URL).json() == {"status": "ok"}


def test_without_a_replica_no_read_from(staff: Client) -> None:
    assert "read_from" not in staff.get(URL).json()
