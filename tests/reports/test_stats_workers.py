"""The live workers in every face: stats, health, checkjobs --stuck-max, jobstats, prunejobs."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.test import Client, override_settings
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Worker
from django_leasejobs.reports import health, stats

from ..conftest import worker_row
from ..management.commands.test_monitoring_commands import check, run

pytestmark = pytest.mark.django_db

TOKEN = "tok3n-for-the-monitoring-views_0123456789abcdef"


@pytest.fixture
def three_workers() -> None:
    """Two live workers (one with two stuck handlers) and one lost with a stale stuck count."""
    worker_row("live-a", seconds_ago=5, stuck=2, running=3)
    worker_row("live-b", running=1)
    worker_row("lost-c", seconds_ago=600, stuck=7)


def test_stats_list_the_workers_and_total_the_stuck_handlers_of_live_ones(three_workers) -> None:
    result = stats.collect()
    by_id = {w.worker_id: w for w in result.workers}
    assert [w.worker_id for w in result.workers] == ["live-a", "live-b", "lost-c"]
    assert (by_id["live-a"].running, by_id["live-a"].stuck, by_id["live-a"].lost) == (3, 2, False)
    assert by_id["live-a"].last_seen_age >= 5
    assert by_id["live-b"].last_seen_age < by_id["live-a"].last_seen_age
    assert by_id["lost-c"].lost
    assert by_id["lost-c"].last_seen_age >= 600
    assert result.stuck == 2  # the lost worker's 7 are old news
    data = json.loads(json.dumps(result.as_dict()))
    assert data["stuck"] == 2
    assert data["workers"][0]["worker_id"] == "live-a"
    assert data["workers"][0]["host"] == "host-a"


def test_evaluate_judges_the_stuck_total_whatever_the_queues(three_workers) -> None:
    result = stats.collect()
    assert health.evaluate(result, health.Thresholds(max_stuck=2)) == []
    (problem,) = health.evaluate(result, health.Thresholds(max_stuck=1), queues=["mail"])
    assert (problem.queue, problem.metric, problem.value, problem.limit) == ("", "stuck", 2, 1)
    assert str(problem).startswith("workers: 2 stuck handler(s), more than 1")
    assert problem.setting == "LEASEJOBS_HEALTH_MAX_STUCK"


@pytest.fixture
def unserved(make_due) -> dict[str, int]:
    """Due jobs in queues a worker serves or not: mail and reports waited 2 minutes, recent 30 s,
    held is paused. Workers: live-a serves default and mail; lost-c served every queue."""
    due = {
        "mail": jobs.noop.enqueue(queue="mail"),
        "reports": jobs.noop.enqueue(queue="reports"),
        "held": jobs.noop.enqueue(queue="held"),
    }
    make_due(*due.values(), seconds_ago=120)
    make_due(jobs.noop.enqueue(queue="recent"), seconds_ago=30)
    protocol.pause(queue="held")
    worker_row("live-a", seconds_ago=5)  # serves default,mail
    worker_row("lost-c", seconds_ago=600, queues="*")
    return {name: job.pk for name, job in due.items()}


def test_evaluate_names_a_queue_with_due_jobs_no_live_worker_serves(unserved) -> None:
    (problem,) = health.evaluate(stats.collect(), health.Thresholds(max_unserved_age=60))
    assert (problem.queue, problem.metric, problem.limit) == ("reports", "unserved", 60)
    assert 120 <= problem.value < 180
    assert str(problem).startswith("queue 'reports': due jobs have waited 12")
    assert "no live worker serves this queue: start one without --queues" in str(problem)
    assert problem.setting == "LEASEJOBS_HEALTH_MAX_UNSERVED_AGE"
    assert health.evaluate(stats.collect(), health.Thresholds(max_unserved_age=150)) == []
    worker_row("live-b", queues="*")  # a worker of every queue serves it
    assert health.evaluate(stats.collect(), health.Thresholds(max_unserved_age=60)) == []


def test_a_worker_row_cut_to_its_column_is_taken_to_serve_every_queue(unserved) -> None:
    worker_row("live-d", queues="mail,rep\u2026")
    assert health.evaluate(stats.collect(), health.Thresholds(max_unserved_age=60)) == []


class TestUnserved:
    """On by default (LEASEJOBS_HEALTH_MAX_UNSERVED_AGE = 60): a plain checkjobs checks it."""

    def test_checkjobs_fails_by_default_naming_the_queue(self, unserved) -> None:
        status, output = check()
        assert status == 1
        assert output.startswith("UNHEALTHY queue 'reports': due jobs have waited 12")
        assert output.count("UNHEALTHY") == 1
        assert check("--max-unserved-age", "5m")[0] == 0
        assert check("--queue", "mail")[0] == 0
        worker_row("live-b", queues="reports")
        assert check()[0] == 0

    @override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
    def test_the_setting_turns_it_off(self, unserved) -> None:
        with pytest.raises(CommandError, match="Nothing to check"):
            run("checkjobs")
        assert check("--max-unserved-age", "60")[0] == 1

    def test_the_health_view_answers_503_and_names_it_to_monitors(self, unserved) -> None:
        assert Client().get("/jobs/health/").json() == {"status": "unhealthy"}
        with override_settings(LEASEJOBS_MONITORING_TOKEN=TOKEN):
            response = as_monitor("/jobs/health/")
            assert response.status_code == 503
            (problem,) = response.json()["problems"]
            assert (problem["queue"], problem["metric"]) == ("reports", "unserved")
            assert response.json()["thresholds"]["max_unserved_age"] == 60
            assert as_monitor("/jobs/health/?max_unserved_age=5m").status_code == 200


def as_monitor(path: str) -> Any:
    return Client().get(path, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


class TestCheckJobs:
    def test_fails_when_the_stuck_total_passes_the_limit(self, three_workers) -> None:
        status, output = check("--stuck-max", "1")
        assert status == 1
        assert "UNHEALTHY workers: 2 stuck handler(s), more than 1" in output

    def test_passes_within_the_limit_and_says_the_total(self, three_workers) -> None:
        assert check("--stuck-max", "2") == (
            0,
            "OK: every queue within limits (oldest due age 0 s, dead last hour 0, "
            "expired leases 0, stuck handlers 2)\n",
        )

    @override_settings(LEASEJOBS_HEALTH_MAX_STUCK=0)
    def test_the_setting_is_the_default(self, three_workers) -> None:
        assert check()[0] == 1
        assert check("--stuck-max", "5")[0] == 0

    @pytest.mark.parametrize(
        ("value", "message"),
        [("-1", "must be 0 or more"), ("1.5", "not a whole number"), ("many", "not a whole")],
    )
    def test_bad_values_are_refused(self, value: str, message: str) -> None:
        with pytest.raises(CommandError, match=message):
            run("checkjobs", "--stuck-max", value)

    def test_keyword_options_are_checked_too(self) -> None:
        with pytest.raises(CommandError, match="--stuck-max must be 0 or more") as info:
            run("checkjobs", max_stuck=-1)
        assert info.value.returncode == 2
        with pytest.raises(CommandError, match="--stuck-max: 'x' is not a whole"):
            run("checkjobs", max_stuck="x")


class TestHealthView:
    @pytest.fixture(autouse=True)
    def token(self, settings) -> None:
        settings.LEASEJOBS_MONITORING_TOKEN = TOKEN

    def get(self, query: str = "") -> Any:
        return Client().get(f"/jobs/health/{query}", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    def test_the_numbers_include_the_workers_and_the_stuck_total(self, three_workers) -> None:
        response = self.get()
        assert response.status_code == 200
        body = response.json()
        assert body["stuck"] == 2
        assert [w["worker_id"] for w in body["workers"]] == ["live-a", "live-b", "lost-c"]
        assert body["thresholds"]["max_stuck"] is None

    def test_503_past_max_stuck(self, three_workers) -> None:
        response = self.get("?max_stuck=1")
        assert response.status_code == 503
        (problem,) = response.json()["problems"]
        assert (problem["metric"], problem["value"], problem["limit"]) == ("stuck", 2, 1)
        assert self.get("?max_stuck=2").status_code == 200

    @pytest.mark.parametrize("value", ["-1", "1.5", "x", ""])
    def test_a_bad_max_stuck_is_a_400(self, value: str) -> None:
        response = self.get(f"?max_stuck={value}")
        assert response.status_code == 400
        assert "max_stuck must be a whole number" in response.json()["error"]


class TestJobStats:
    def test_the_table_lists_each_worker_after_the_queues(self, three_workers) -> None:
        lines = run("jobstats").splitlines()
        start = lines.index("") + 1
        assert lines[start].split() == [
            "worker", "last", "seen", "running", "stuck", "threads", "async", "queues"
        ]  # fmt: skip
        rows = {line.split()[0]: line.split()[1:] for line in lines[start + 1 : -1]}
        assert re.fullmatch(r"\d+s", rows["live-a"][0])  # seconds since its last beat
        assert rows["live-a"][1:] == ["3", "2", "4", "100", "default,mail"]
        assert rows["live-b"][1:3] == ["1", "0"]
        assert rows["lost-c"][0].startswith("10m")
        assert rows["lost-c"][1:4] == ["LOST", "2", "7"]
        assert lines[-1] == "stuck handlers on live workers: 2"

    def test_json_has_the_workers(self, three_workers) -> None:
        data = json.loads(run("jobstats", "--json"))
        assert data["stuck"] == 2
        assert [(w["worker_id"], w["stuck"], w["lost"]) for w in data["workers"]] == [
            ("live-a", 2, False),
            ("live-b", 0, False),
            ("lost-c", 7, True),
        ]


class TestPruneJobs:
    def test_deletes_the_rows_of_workers_not_seen_for_the_age(self, three_workers) -> None:
        # Every run also prunes the dashboard's samples and the advisor's hourly rows.
        assert run("prunejobs", "--workers-older-than", "5m", "--dry-run") == (
            "samples: would delete 0 older than 7d00h\n"
            "runtime stats: would delete 0 hourly rows over 7d00h old\n"
            "workers: would delete 1 not seen for 5m00s\n"
        )
        assert Worker.objects.count() == 3
        assert run("prunejobs", "--workers-older-than", "5m") == (
            "samples: deleted 0 older than 7d00h\n"
            "runtime stats: deleted 0 hourly rows over 7d00h old\n"
            "workers: deleted 1 not seen for 5m00s\n"
        )
        assert sorted(Worker.objects.values_list("worker_id", flat=True)) == ["live-a", "live-b"]

    @pytest.mark.parametrize(
        ("value", "message"), [("soon", "is not a duration"), ("0s", "must be a positive age")]
    )
    def test_a_bad_age_is_refused(self, three_workers, value: str, message: str) -> None:
        with pytest.raises(CommandError, match=message):
            run("prunejobs", "--workers-older-than", value)
        assert Worker.objects.count() == 3
