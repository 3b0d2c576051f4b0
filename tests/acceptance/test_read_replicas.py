"""Read replicas: a project whose queue database ``jobs`` has a replica alias, ``jobs_replica``.

A project made by ``startproject`` (tests/newproject.py), as tests/acceptance/test_queue_database.py
makes one, with a third alias: ``jobs_replica`` opens its own connections to the queue database
(the same database: the alias is what routing sees, which is what these tests prove), and
``LEASEJOBS_READ_DATABASES = {"jobs": "jobs_replica"}``. The project's own code
(``notify/probe.py``) counts the statements each alias runs, from every thread: on each new
connection to the replica a wrapper counts what it executes. A worker run (claims, heartbeats,
completions, a retry, a dead letter, a workflow, dedupe, result waits) runs none there; the
admin's lists and dashboard, the stats, the API's lists and a monitor's health answer do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..newproject import NewProject, add, add_app, ok, probe, start_project, two_databases

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

JOBS = """
    from django_leasejobs import Retry, job


    @job
    def greet(name):
        return f"hello {name}"


    @job(max_attempts=1)
    def broken():
        raise ValueError("always")


    @job(takes_context=True, max_attempts=3)
    def flaky(ctx):
        if ctx.attempt == 1:
            raise Retry("once more", after=0)
        return f"attempt {ctx.attempt}"
"""

PROBE = """
    import io
    import json

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db.backends.signals import connection_created
    from django.test import Client

    from django_leasejobs import chain
    from django_leasejobs.models import DeadLetter, Job
    from django_leasejobs.stats import collect

    REPLICA = "jobs_replica"
    counted = {"statements": 0}


    def _count(execute, sql, params, many, context):
        counted["statements"] += 1
        return execute(sql, params, many, context)


    def _watch(sender, connection, **kwargs):
        # Every thread's connection to the replica, the worker's threads too.
        if connection.alias == REPLICA and _count not in connection.execute_wrappers:
            connection.execute_wrappers.append(_count)


    connection_created.connect(_watch)


    def on_replica(action):
        before = counted["statements"]
        value = action()
        return counted["statements"] - before, value


    def worker_run():
        from notify.jobs import broken, flaky, greet

        def run():
            jobs = [greet.enqueue(f"w{i}") for i in range(3)]
            first = greet.using(dedupe_key="once").enqueue("d")
            again = greet.using(dedupe_key="once").enqueue("d")
            dead = broken.enqueue()
            retried = flaky.enqueue()
            run_id = chain(greet.s("a"), greet.si("b")).enqueue().pk
            call_command("runjobworker", "--burst", "--concurrency", "2", stdout=io.StringIO())
            results = [job.wait(timeout=10) for job in [*jobs, retried]]
            return {
                "results": results,
                "deduped": first.pk == again.pk,
                "dead": Job.objects.using("jobs").get(pk=dead.pk).status,
                "run": run_id,
                "first": jobs[0].pk,
            }

        statements, seen = on_replica(run)
        # A job read on the replica (as a list shows it) waits on the primary.
        listed = Job.objects.using(REPLICA).get(pk=seen.pop("first"))
        before = counted["statements"]
        waited = listed.wait(timeout=5)
        seen["listed_wait_on_replica"] = counted["statements"] - before
        seen["listed_result"] = waited
        return {"replica_statements": statements, **seen}


    def _api(client_kwargs, path):
        return Client(HTTP_HOST="localhost").get(path, **client_kwargs)


    def reads():
        boss = User.objects.create_superuser("boss", "boss@example.com", "pw")
        admin = Client(HTTP_HOST="localhost")
        admin.force_login(boss)
        out = io.StringIO()
        call_command("jobapitoken", "create", "boss", stdout=out)
        secret = out.getvalue().splitlines()[0].split(": ")[-1]
        bearer = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
        job = Job.objects.using("jobs").order_by("-id").first()
        pages = {}
        for name in ("job", "deadletter", "workflowrun", "schedule"):
            count, page = on_replica(lambda: admin.get(f"/admin/django_leasejobs/{name}/"))
            text = page.content.decode()
            said = [line.strip() for line in text.splitlines() if "Read from the replica" in line]
            pages[f"admin {name} list"] = [count, page.status_code, said]
        count, page = on_replica(lambda: admin.get("/admin/django_leasejobs/job/dashboard/"))
        text = page.content.decode()
        pages["admin dashboard"] = [count, page.status_code, "Read from the replica" in text]
        for path in ("jobs/", "dead-letters/", "workflows/", "schedules/", "queues/"):
            count, page = on_replica(lambda: _api(bearer, f"/jobs/api/{path}"))
            pages[f"api {path}"] = [count, page.status_code]
        count, numbers = on_replica(lambda: collect().as_dict()["total"])
        pages["stats"] = [count, numbers["pending"]]
        count, page = on_replica(lambda: admin.get("/jobs/health/"))
        pages["monitor health"] = [count, page.status_code, page.json()["read_from"]]
        count, page = on_replica(lambda: Client(HTTP_HOST="localhost").get("/jobs/health/"))
        pages["anonymous health"] = [count, page.status_code]
        count, _ = on_replica(lambda: call_command("jobstats", "--json", stdout=io.StringIO()))
        pages["jobstats"] = [count]
        count, _ = on_replica(lambda: call_command("checkjobs", "--max-due-age", "1h"))
        pages["checkjobs"] = [count]
        count, page = on_replica(lambda: admin.get(f"/admin/django_leasejobs/job/{job.pk}/change/"))
        pages["admin job page"] = [count, page.status_code]
        count, page = on_replica(lambda: _api(bearer, f"/jobs/api/jobs/{job.pk}/"))
        pages["api job"] = [count, page.status_code]
        pending = Job.objects.using("jobs").create(name="notify.jobs.greet", args=["late"])
        count, page = on_replica(
            lambda: admin.post(
                "/admin/django_leasejobs/job/",
                {"action": "cancel_jobs", "_selected_action": [pending.pk]},
            )
        )
        status = Job.objects.using("jobs").get(pk=pending.pk).status
        pages["admin cancel action"] = [count, page.status_code, status]
        return pages


    def show(value):
        print("PROBE " + json.dumps(value))
"""

SETTINGS = """
DATABASES["jobs"] = {jobs!r}
DATABASES["jobs_replica"] = {jobs!r}
LEASEJOBS_DATABASE = "jobs"
LEASEJOBS_READ_DATABASES = {{"jobs": "jobs_replica"}}
DATABASE_ROUTERS = ["django_leasejobs.routers.JobsRouter"]
INSTALLED_APPS += ["notify"]
"""

URLS = """
from django.urls import include

urlpatterns += [
    path("jobs/api/", include("django_leasejobs.api.urls")),
    path("jobs/", include("django_leasejobs.urls")),
]
"""


@pytest.fixture
def project_databases(tmp_path: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The project's ``default`` and ``jobs`` databases, new and empty."""
    with two_databases(tmp_path, ("rapp", "rqueue")) as made:
        yield made


@pytest.fixture
def project(tmp_path: Path, project_databases: tuple[dict[str, Any], dict[str, Any]]) -> NewProject:
    """Data in ``default``, jobs in ``jobs``, read through ``jobs_replica``; migrated."""
    default, jobs = project_databases
    made = start_project(tmp_path / "project", default)
    add_app(made, "notify", {"jobs": JOBS, "probe": PROBE})
    add(made, "settings.py", SETTINGS.format(jobs=jobs))
    add(made, "urls.py", URLS)
    ok(made.manage("migrate", "--database", "jobs"))
    ok(made.manage("migrate"))
    return made


def test_a_worker_run_reads_nothing_from_the_replica(project: NewProject) -> None:
    seen = probe(project, "worker_run()")
    assert seen["replica_statements"] == 0, seen
    assert seen["results"] == ["hello w0", "hello w1", "hello w2", "attempt 2"]
    assert seen["deduped"] is True
    assert seen["dead"] == "dead"
    assert seen["listed_wait_on_replica"] == 0
    assert seen["listed_result"] == "hello w0"


def test_the_read_side_reads_the_replica_and_nothing_that_acts_does(project: NewProject) -> None:
    probe(project, "worker_run()")
    pages = probe(project, "reads()")
    # The same database under another alias: no standby (a primary, or SQLite).
    said = "Read from the replica jobs_replica (not a standby: its rows are current)."
    for name in ("job", "deadletter", "workflowrun", "schedule"):
        count, status, messages = pages[f"admin {name} list"]
        assert (status, count > 0) == (200, True), (name, pages)
        assert any(said in line for line in messages), messages
    assert pages["admin dashboard"][1:] == [200, True]
    assert pages["admin dashboard"][0] > 0
    for path in ("jobs/", "dead-letters/", "workflows/", "schedules/", "queues/"):
        count, status = pages[f"api {path}"]
        assert (status, count > 0) == (200, True), (path, pages)
    assert pages["stats"][0] > 0
    count, status, read_from = pages["monitor health"]
    assert count > 0
    assert read_from["database"] == "jobs_replica"
    assert pages["jobstats"][0] > 0
    # What a probe judges, and everything that acts, reads the primary.
    assert pages["anonymous health"][0] == 0
    assert pages["checkjobs"] == [0]
    assert pages["admin job page"] == [0, 200]
    assert pages["api job"] == [0, 200]
    assert pages["admin cancel action"] == [0, 302, "cancelled"]


def test_a_replica_keyed_by_another_database_is_an_error(project: NewProject) -> None:
    add(project, "settings.py", 'LEASEJOBS_READ_DATABASES = {"default": "jobs_replica"}\n')
    done = project.manage("check")
    assert done.returncode != 0
    assert "leasejobs.E018" in done.stderr, done.stderr
    assert "LEASEJOBS_READ_DATABASES maps 'default', which is not a queue database" in done.stderr


def test_a_replica_not_in_databases_is_an_error(project: NewProject) -> None:
    add(project, "settings.py", 'LEASEJOBS_READ_DATABASES = {"jobs": "jobs_replika"}\n')
    done = project.manage("check")
    assert done.returncode != 0
    assert "leasejobs.E001" in done.stderr, done.stderr
    assert "names 'jobs_replika'" in done.stderr
