"""Shards: ``LEASEJOBS_QUEUE_DATABASES`` writes a queue's jobs in a database of its own, a worker
serves one database (``Worker(database=)``, ``runjobworker --database``), and what would span two
is refused with the databases named.

Two real databases of the test run's engine: ``default`` and ``shard`` (testproject's
settings). Rows are counted in each, by the ORM, never through the code under test.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import router, transaction
from django.test import override_settings
from testapp import jobs

from django_leasejobs import Workflow, chain
from django_leasejobs.core.conf import settings
from django_leasejobs.db.routing import JobsRouter
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, Schedule, WorkflowRun
from django_leasejobs.models.databases import (
    databases_of,
    job_database,
    queue_database,
    queue_databases,
    using_database,
)
from django_leasejobs.runtime.worker import Worker

pytestmark = pytest.mark.django_db(databases=["default", "shard"], transaction=True)

ROUTES = {"reports": "shard", "eu-*": "shard", "eu-west": "default"}
FAST = {"poll": 0.05, "heartbeat": 1, "lease": 30, "scheduler": False}


@pytest.fixture
def shards() -> Iterator[None]:
    with override_settings(LEASEJOBS_QUEUE_DATABASES=ROUTES):
        yield


def rows(alias: str, **filters: object) -> list[tuple[int, str, str]]:
    found = Job.objects.using(alias).filter(**filters).order_by("pk")
    return list(found.values_list("pk", "queue", "status"))


def test_an_exact_name_wins_over_a_glob_and_other_queues_stay_home(shards: None) -> None:
    assert queue_database("reports") == "shard"
    assert queue_database("eu-north") == "shard"
    assert queue_database("eu-west") == "default"  # exact, though a glob before it matches
    assert queue_database("default") == "default"
    assert queue_database("report") == "default"
    assert queue_databases() == ["default", "shard"]
    assert databases_of(["reports", "mail", "eu-1"]) == {
        "shard": ["eu-1", "reports"],
        "default": ["mail"],
    }


def test_without_routes_everything_is_as_with_one_database() -> None:
    assert settings.QUEUE_DATABASES == {}
    assert queue_databases() == ["default"]
    assert queue_database("reports") == "default"
    job = jobs.noop.using(queue="reports").enqueue()
    assert job._state.db == "default"
    assert rows("shard") == []


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (["reports"], "must be a dict of queue name (or glob) -> database alias"),
        ({"reports": "nowhere"}, "sends 'reports' to 'nowhere', which is not a database"),
        ({"": "shard"}, "keys are queue names or globs (non-empty strings), not ''"),
        ({"reports": 3}, "sends 'reports' to 3"),
    ],
)
def test_a_bad_setting_is_refused_with_what_is_wrong(value: object, said: str) -> None:
    with (
        override_settings(LEASEJOBS_QUEUE_DATABASES=value),
        pytest.raises(ImproperlyConfigured, match="LEASEJOBS_QUEUE_DATABASES") as caught,
    ):
        queue_database("reports")
    assert said in str(caught.value)


def test_an_enqueue_is_written_in_its_queue_s_database(shards: None) -> None:
    home = jobs.add.enqueue(1, 2)
    away = jobs.add.using(queue="reports").enqueue(3, 4)
    assert (home._state.db, away._state.db) == ("default", "shard")
    assert rows("default") == [(home.pk, "default", "pending")]
    assert rows("shard") == [(away.pk, "reports", "pending")]


def test_an_enqueue_is_atomic_with_its_own_database_s_transaction(shards: None) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using="shard"):
        jobs.noop.using(queue="reports").enqueue()
        assert len(rows("shard")) == 1
        raise RuntimeError("rolled back")
    assert rows("shard") == []


def test_enqueue_many_writes_in_one_database_or_is_refused_naming_them(shards: None) -> None:
    many = jobs.add.using(queue="eu-1").enqueue_many([((1, 1), {}), ((2, 2), {})])
    assert {job._state.db for job in many} == {"shard"}
    assert [pk for pk, _, _ in rows("shard")] == [job.pk for job in many]
    with pytest.raises(JobValidationError) as caught:
        jobs.add.enqueue_many([((1, 1), {}), {"args": (2, 2), "queue": "reports"}])
    said = str(caught.value)
    assert "enqueue_many would be written in 2 databases" in said
    assert "'default' for 'default'" in said
    assert "'shard' for 'reports'" in said
    assert len(rows("shard")) == 2
    assert rows("default") == []


def test_a_workflow_across_two_databases_is_refused_at_enqueue(shards: None) -> None:
    flow = chain(jobs.add.s(1, 2), jobs.noop.using(queue="reports").si())
    with pytest.raises(JobValidationError, match="'shard' for 'reports'"):
        flow.enqueue()
    assert not WorkflowRun.objects.using("default").exists()
    assert not WorkflowRun.objects.using("shard").exists()
    assert rows("default") == rows("shard") == []


def test_a_workflow_in_a_shard_runs_there_by_its_worker(shards: None) -> None:
    flow = Workflow(name="reports")
    first = flow.add(jobs.add.using(queue="reports").s(1, 2))
    flow.add(jobs.add.using(queue="eu-2").si(3, 4), after=[first])
    run = flow.enqueue()
    assert run._state.db == "shard"
    Worker(database="shard", concurrency=1, **FAST).run(burst=True)
    statuses = [status for _, _, status in rows("shard")]
    assert statuses == ["succeeded", "succeeded"]
    assert WorkflowRun.objects.using("shard").get(pk=run.pk).status == "succeeded"
    assert rows("default") == []


def test_a_worker_serves_one_database_and_never_claims_across(shards: None) -> None:
    home = jobs.add.enqueue(1, 2)
    away = jobs.add.using(queue="reports").enqueue(3, 4)
    summary = Worker(database="shard", concurrency=2, **FAST).run(burst=True)
    assert summary.succeeded == 1
    assert rows("shard") == [(away.pk, "reports", "succeeded")]
    assert rows("default") == [(home.pk, "default", "pending")]
    Worker(concurrency=2, **FAST).run(burst=True)  # the home database's worker
    assert rows("default") == [(home.pk, "default", "succeeded")]
    assert Job.objects.using("shard").get(pk=away.pk).result == 7


@pytest.mark.django_db(databases=["default", "shard"], transaction=True, reset_sequences=True)
def test_ids_repeat_across_databases_and_each_job_keeps_to_its_own(shards: None) -> None:
    home = jobs.add.enqueue(1, 2)
    away = jobs.add.using(queue="reports").enqueue(3, 4)
    assert home.pk == away.pk == 1  # two tables, two sequences, both started again
    Worker(database="shard", concurrency=1, **FAST).run(burst=True)
    assert away.wait(timeout=5) == 7  # the handle reads its own database
    assert Job.objects.using("default").get(pk=home.pk).status == "pending"
    assert jobs.add.get_result(f"shard:{away.pk}").result == 7
    assert jobs.add.get_result(home.pk).status == "pending"


def test_get_result_reads_the_database_of_the_function_s_queue(shards: None) -> None:
    with override_settings(LEASEJOBS_QUEUE_DATABASES={"default": "shard"}):
        job = jobs.add.enqueue(2, 2)
        assert job._state.db == "shard"
        assert jobs.add.get_result(job.pk).pk == job.pk
    with pytest.raises(ValueError, match="'elsewhere', which is not a queue database"):
        jobs.add.get_result("elsewhere:1")


def test_a_handler_s_enqueue_goes_where_its_queue_lives(shards: None) -> None:
    parent = jobs.enqueues_child.using(queue="reports").enqueue("default")
    Worker(database="shard", concurrency=1, **FAST).run(burst=True)
    assert Job.objects.using("shard").get(pk=parent.pk).status == "succeeded"
    assert [queue for _, queue, _ in rows("default")] == ["default"]


def test_a_dedupe_key_is_per_database(shards: None) -> None:
    home = jobs.noop.using(dedupe_key="k").enqueue()
    away = jobs.noop.using(dedupe_key="k", queue="reports").enqueue()
    again = jobs.noop.using(dedupe_key="k", queue="eu-3").enqueue()
    assert (home._state.db, away._state.db) == ("default", "shard")
    assert again.pk == away.pk
    assert again._state.db == "shard"


def test_a_worker_refuses_a_database_or_queue_it_cannot_serve(shards: None) -> None:
    with pytest.raises(ValueError, match="'nowhere' is not a queue database"):
        Worker(database="nowhere", **FAST)
    with pytest.raises(ValueError, match="queues reports in 'shard', not in 'default'"):
        Worker(["reports", "default"], **FAST)
    with pytest.raises(CommandError, match="queues default in 'default', not in 'shard'"):
        call_command("runjobworker", "--database", "shard", "--queues", "default", "--burst")


def test_runjobworker_database_serves_that_database_and_says_so(shards: None) -> None:
    away = jobs.add.using(queue="reports").enqueue(3, 4)
    home = jobs.add.enqueue(1, 2)
    out = io.StringIO()
    call_command("runjobworker", "--database", "shard", "--burst", "--no-scheduler", stdout=out)
    banner = out.getvalue()
    assert "database:  shard (" in banner
    assert Job.objects.using("shard").get(pk=away.pk).status == "succeeded"
    assert Job.objects.using("default").get(pk=home.pk).status == "pending"


def test_using_database_is_local_to_its_block_and_thread(shards: None) -> None:
    with using_database("shard"):
        assert job_database() == "shard"
        seen: list[str] = []
        import threading

        thread = threading.Thread(target=lambda: seen.append(job_database()))
        thread.start()
        thread.join()
        assert seen == ["default"]  # a plain thread: the worker's own start in a copy
    assert job_database() == "default"


def test_the_router_migrates_the_app_in_every_queue_database_and_follows_a_row() -> None:
    with override_settings(
        DATABASE_ROUTERS=["django_leasejobs.routers.JobsRouter"],
        LEASEJOBS_DATABASE="default",
        LEASEJOBS_QUEUE_DATABASES={"reports": "shard"},
    ):
        routed = JobsRouter()
        assert routed.allow_migrate("shard", "django_leasejobs", model_name="job") is True
        assert routed.allow_migrate("default", "django_leasejobs", model_name="job") is True
        assert routed.allow_migrate("other", "django_leasejobs", model_name="job") is False
        away = jobs.noop.using(queue="reports").enqueue()
        assert router.db_for_read(Job, instance=away) == "shard"
        assert router.db_for_write(Job) == "default"
        with using_database("shard"):
            assert router.db_for_write(Job) == "shard"


def test_each_queue_database_holds_the_schedules_of_its_queues(shards: None) -> None:
    declared = {
        "home": {"job": "testapp.jobs.noop", "cron": "0 3 * * *"},
        "away": {"job": "testapp.jobs.noop", "cron": "0 3 * * *", "queue": "reports"},
        "other": {"job": "testapp.jobs.other_queue", "cron": "0 3 * * *"},
    }
    with override_settings(
        LEASEJOBS_SCHEDULES=declared,
        LEASEJOBS_QUEUE_DATABASES={"reports": "shard", "other": "shard"},
    ):
        out = io.StringIO()
        call_command("syncschedules", stdout=out)
        assert "Database default:\nhome: created" in out.getvalue()
        assert "Database shard:\naway: created\nother: created" in out.getvalue()
        assert names("default") == ["home"]
        assert names("shard") == ["away", "other"]
        # A worker syncs its own database's at start, and leaves the other's alone.
        Worker(database="shard", concurrency=1, poll=0.05, heartbeat=1).run(burst=True)
        assert names("default") == ["home"]
    # "other" moves home: made there, disabled (kept as history) in the shard.
    with override_settings(
        LEASEJOBS_SCHEDULES=declared, LEASEJOBS_QUEUE_DATABASES={"reports": "shard"}
    ):
        out = io.StringIO()
        call_command("syncschedules", stdout=out)
        assert "Database shard:\nother: disabled" in out.getvalue()
        assert names("default") == ["home", "other"]
        assert names("shard") == ["away"]


def names(alias: str) -> list[str]:
    schedules = Schedule.objects.using(alias).filter(enabled=True).order_by("name")
    return list(schedules.values_list("name", flat=True))


def test_the_testing_helpers_see_and_run_every_queue_database(shards: None) -> None:
    from django_leasejobs import testing

    with testing.capture_jobs() as captured:
        parent = jobs.enqueues_child.using(queue="reports").enqueue("default")
        testing.assert_enqueued(jobs.enqueues_child, queue="reports")
        testing.refute_enqueued(jobs.noop)
    assert [(job.pk, job._state.db) for job in captured.jobs] == [(parent.pk, "shard")]
    later = jobs.add.using(queue="eu-5", delay=3600).enqueue(1, 1)
    summary = testing.drain()  # the shard's parent, then the home child it enqueued
    assert summary.succeeded == 2
    assert rows("default", status="succeeded")[0][1] == "default"
    testing.travel(3600)
    assert testing.drain().succeeded == 1
    assert Job.objects.using("shard").get(pk=later.pk).status == "succeeded"


def test_eager_mode_runs_a_shard_s_job_and_workflow_in_their_database(shards: None) -> None:
    with override_settings(LEASEJOBS_EAGER=True):
        job = jobs.add.using(queue="reports").enqueue(20, 22)
        run = chain(
            jobs.add.using(queue="reports").si(1, 1), jobs.add.using(queue="eu-9").si(2, 2)
        ).enqueue()
    assert Job.objects.using("shard").get(pk=job.pk).result == 42
    assert WorkflowRun.objects.using("shard").get(pk=run.pk).status == "succeeded"
    assert rows("default") == []


def test_an_operator_s_call_acts_in_the_database_it_is_given(shards: None) -> None:
    from django_leasejobs import operations

    home = jobs.noop.enqueue()
    away = jobs.noop.using(queue="reports").enqueue()
    with operations.using_database("shard"):
        assert operations.cancel(away.pk) is True
    assert Job.objects.using("shard").get(pk=away.pk).status == "cancelled"
    assert Job.objects.using("default").get(pk=home.pk).status == "pending"


def test_the_queue_gauges_count_each_queue_where_it_lives(shards: None) -> None:
    from django_leasejobs.reports import queue_gauges

    jobs.noop.enqueue()
    jobs.noop.using(queue="reports").enqueue_many([((), {})] * 2)
    with override_settings(LEASEJOBS_QUEUES=["default", "reports"]):  # zeros in both
        depth = {queue: due for queue, due, _ in queue_gauges.read()}
    assert depth == {"default": 1.0, "reports": 2.0}


def test_the_prometheus_gauges_count_each_queue_where_it_lives(shards: None) -> None:
    import prometheus_client

    from django_leasejobs import metrics

    jobs.noop.enqueue()
    jobs.noop.using(queue="reports").enqueue_many([((), {})] * 2)
    metrics.install()
    try:
        with override_settings(LEASEJOBS_QUEUES=["default", "reports"]):
            due = {
                queue: prometheus_client.REGISTRY.get_sample_value(
                    "leasejobs_jobs_due", {"queue": queue}
                )
                for queue in ("default", "reports")
            }
    finally:
        metrics.uninstall()
    assert due == {"default": 1.0, "reports": 2.0}


def test_a_workflow_run_read_from_a_shard_is_cancelled_there(shards: None) -> None:
    from django_leasejobs import workflows

    run = chain(
        jobs.add.using(queue="reports").si(1, 1), jobs.add.using(queue="reports").si(2, 2)
    ).enqueue()
    assert run._state.db == "shard"
    assert workflows.cancel(run) is True  # the row says where it is: no using_database needed
    assert WorkflowRun.objects.using("shard").get(pk=run.pk).status == "cancelled"
