"""``reports.shards``: each queue database read and judged on its own, and a problem that
names its database only when there are several (with one, the text and JSON of before)."""

from __future__ import annotations

import pytest
from django.test import override_settings
from testapp import jobs

from django_leasejobs.models import Job
from django_leasejobs.reports import shards
from django_leasejobs.reports.health import UNREADABLE, Problem, Thresholds

from ..conftest import shifted

pytestmark = pytest.mark.django_db(databases=["default", "shard"])

LIMIT = Thresholds(max_due_age=60)


def test_a_problem_names_its_database_only_when_given_one() -> None:
    alone = Problem("mail", "oldest_due_age", 90, 60)
    assert str(alone).startswith("queue 'mail': the oldest due job has waited 90 s")
    assert "database" not in alone.as_dict()
    named = Problem("mail", "oldest_due_age", 90, 60, database="shard")
    assert str(named) == f"[shard] {alone}"
    assert named.as_dict()["database"] == "shard"
    assert named.as_dict()["message"] == str(named)
    unreadable = Problem("", UNREADABLE, 0, 0, database="shard")
    assert str(unreadable) == "[shard] cannot read the jobs table"
    assert unreadable.setting == ""
    assert alone.setting == "LEASEJOBS_HEALTH_MAX_DUE_AGE"


@override_settings(LEASEJOBS_QUEUE_DATABASES={"reports": "shard"})
def test_each_database_is_read_on_its_own_and_judged_naming_it() -> None:
    away = jobs.noop.using(queue="reports").enqueue()
    Job.objects.using("shard").filter(pk=away.pk).update(run_at=shifted(-120))
    jobs.noop.enqueue()
    readings = shards.read_each(probe=True)
    assert [r.database for r in readings] == ["default", "shard"]
    assert [sorted(r.stats.queues) for r in readings if r.stats] == [["default"], ["reports"]]
    (problem,) = shards.judge(readings, LIMIT)
    assert (problem.database, problem.queue, problem.metric) == (
        "shard",
        "reports",
        "oldest_due_age",
    )
    assert shards.judge(readings, LIMIT, ["default"]) == []
    assert shards.total(readings).pending == 2


def test_with_one_database_nothing_is_named() -> None:
    job = jobs.noop.enqueue(queue="reports")
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-120))
    readings = shards.read_each(probe=False)
    assert [r.database for r in readings] == ["default"]
    (problem,) = shards.judge(readings, LIMIT)
    assert problem.database == ""
