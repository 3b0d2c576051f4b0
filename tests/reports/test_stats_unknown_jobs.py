"""``jobstats``, ``checkjobs --unknown-max`` and the health verdict count the jobs waiting for a
worker that knows their name (deferred by workers that could not run it), by name."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.core.management.base import CommandError
from django.test import override_settings

from django_leasejobs import protocol
from django_leasejobs.models import Job
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.reports import health, stats

from ..management.commands.test_monitoring_commands import check, run

pytestmark = pytest.mark.django_db

UNKNOWN = Failure("No job is registered as 'x'; it was not run.", kind="unregistered job")


def deferred(name: str) -> Job:
    Job.objects.create(name=name)
    (job,) = protocol.claim("old-worker", batch=1)
    outcome = protocol.defer(
        job.pk,
        job.attempt,
        UNKNOWN,
        deferrals=0,
        grace=dt.timedelta(hours=1),
        worker_id="old-worker",
        reason="not registered",
    )
    assert outcome is Outcome.RELEASED
    return job


@pytest.fixture
def waiting() -> None:
    deferred("shop.jobs.ship")
    deferred("shop.jobs.ship")
    deferred("shop.jobs.bill")
    Job.objects.create(name="shop.jobs.ship")  # waiting, never deferred: not counted


def test_stats_count_them_by_name(waiting) -> None:
    result = stats.collect()
    assert result.unknown == {"shop.jobs.bill": 1, "shop.jobs.ship": 2}
    assert result.unknown_total == 3


def test_jobstats_shows_them_as_json_and_in_the_table(waiting) -> None:
    data = json.loads(run("jobstats", "--json"))
    assert data["unknown_jobs"] == {"shop.jobs.bill": 1, "shop.jobs.ship": 2}
    table = run("jobstats")
    assert "waiting for a worker that knows it: shop.jobs.ship 2" in table
    assert "waiting for a worker that knows it: shop.jobs.bill 1" in table


def test_none_waiting_shows_nothing() -> None:
    assert json.loads(run("jobstats", "--json"))["unknown_jobs"] == {}
    assert "waiting for a worker" not in run("jobstats")


@override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_checkjobs_unknown_max(waiting) -> None:
    status, output = check("--unknown-max", "2")
    assert status == 1
    assert (
        "UNHEALTHY 3 job(s) wait for a worker that knows their name, more than 2 "
        "(shop.jobs.bill 1, shop.jobs.ship 2)"
    ) in output
    status, output = check("--unknown-max", "3")
    assert status == 0
    assert "waiting for a worker that knows them 3" in output


@override_settings(LEASEJOBS_HEALTH_MAX_UNKNOWN=0, LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_the_setting_is_the_default_threshold(waiting) -> None:
    (problem,) = health.evaluate(stats.collect(), health.Thresholds.from_settings())
    assert (problem.metric, problem.value, problem.setting) == (
        "unknown",
        3,
        "LEASEJOBS_HEALTH_MAX_UNKNOWN",
    )
    assert check("--unknown-max", "5")[0] == 0


@override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_queues_are_still_judged_alongside(waiting, make_due) -> None:
    make_due(Job.objects.create(name="shop.jobs.late"), seconds_ago=3600)
    status, output = check("--unknown-max", "0", "--max-due-age", "60")
    assert status == 1
    assert "queue 'default': the oldest due job has waited" in output
    assert "3 job(s) wait for a worker that knows their name" in output


@pytest.mark.parametrize(
    ("value", "message"),
    [("many", "'many' is not a whole number"), ("-1", "must be 0 or more")],
)
def test_a_bad_unknown_max_is_refused(value: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("checkjobs", "--unknown-max", value)


@override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
def test_the_health_view_judges_them(waiting, admin_client) -> None:
    response = admin_client.get("/jobs/health/?max_unknown=2")
    assert response.status_code == 503
    body = response.json()
    assert body["unknown_jobs"] == {"shop.jobs.bill": 1, "shop.jobs.ship": 2}
    (problem,) = body["problems"]
    assert (problem["metric"], problem["value"], problem["limit"]) == ("unknown", 3, 2)
    assert admin_client.get("/jobs/health/?max_unknown=3").status_code == 200
    assert admin_client.get("/jobs/health/?max_unknown=-1").status_code == 400
