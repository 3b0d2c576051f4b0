"""A queue database of its own: a new project whose jobs live in ``jobs``, its data in ``default``.

A project made by ``startproject`` (tests/newproject.py) with two databases on the test run's
server (two SQLite files, or two new databases beside the test database), ``LEASEJOBS_DATABASE =
"jobs"`` and ``JobsRouter``. Everything runs as its user would run it: ``migrate``, a request to
the project's own view that writes a user and enqueues a job, ``runjobworker``, the admin, the
API and the operators' commands, each a subprocess; what landed where is read back by the
project's own code (``notify/probe.py``), since the test process knows neither database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest

from ..newproject import NewProject, add, add_app, ok, probe, start_project, two_databases

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

JOBS = """
    from django_leasejobs import job


    @job
    def greet(name):
        return f"hello {name}"
"""

VIEWS = """
    from django.contrib.auth.models import User
    from django.db import transaction
    from django.http import JsonResponse

    from .jobs import greet


    def signup(request):
        name = request.POST["name"]
        with transaction.atomic():  # the user's database: the enqueue is not part of it
            User.objects.create(username=name)
            job = greet.enqueue(name)
        return JsonResponse({"job": job.pk})
"""

TASKS = """
    try:
        from django.tasks import task
    except ImportError:  # Django 5.2: the backport
        from django_tasks import task


    @task
    def add(a, b):
        return a + b
"""

PROBE = """
    import io
    import json

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client

    from django_leasejobs.models import Job

    PREFIX = "django_leasejobs_"


    def tables():
        return {
            alias: sorted(
                t for t in connections[alias].introspection.table_names() if t.startswith(PREFIX)
            )
            for alias in connections
        }


    def where(job_id):
        found = {}
        for alias, names in tables().items():
            if PREFIX + "job" in names:
                row = Job.objects.using(alias).filter(pk=job_id).values_list("status", flat=True)
                found[alias] = row.first()
        return found


    def signup(name):
        answer = Client().post("/signup/", {"name": name}, HTTP_HOST="localhost")
        users = {alias: User.objects.using(alias).filter(username=name).count()
                 for alias in ("default",)}
        return {"status": answer.status_code, **answer.json(), "users": users}


    def operators(job_id):
        boss = User.objects.create_superuser("boss", "boss@example.com", "pw")
        client = Client(HTTP_HOST="localhost")
        client.force_login(boss)
        listing = client.get("/admin/django_leasejobs/job/")
        change = client.get(f"/admin/django_leasejobs/job/{job_id}/change/")
        dashboard = client.get("/admin/django_leasejobs/job/dashboard/")
        health = Client(HTTP_HOST="localhost").get("/jobs/health/")
        out = io.StringIO()
        call_command("jobapitoken", "create", "boss", stdout=out)
        secret = out.getvalue().splitlines()[0].split(": ")[-1]
        api = Client(HTTP_HOST="localhost").get(
            "/jobs/api/jobs/", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )
        one = Client(HTTP_HOST="localhost").get(
            f"/jobs/api/jobs/{job_id}/", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )
        return {
            "admin_list": listing.status_code,
            "admin_lists_job": f"/admin/django_leasejobs/job/{job_id}/change/" in listing.text,
            "admin_change": change.status_code,
            "dashboard": dashboard.status_code,
            "health": health.status_code,
            "api": api.status_code,
            "api_ids": [row["id"] for row in api.json()["results"]],
            "api_status": one.json().get("status"),
        }


    def tasks_and_workflows():
        from django_leasejobs import chain
        from notify.jobs import greet
        from notify.tasks import add

        result = add.enqueue(2, 3)
        run = chain(greet.si("cy"), greet.si("di")).enqueue()
        return {"task": int(result.id), "run": run.pk}


    def finished(task_id, run_id):
        from django_leasejobs.models import WorkflowRun
        from notify.tasks import add

        runs = {alias: list(WorkflowRun.objects.using(alias).filter(pk=run_id)
                            .values_list("status", flat=True))
                for alias, names in tables().items() if PREFIX + "workflowrun" in names}
        return {"task": where(task_id), "value": add.get_result(str(task_id)).return_value,
                "runs": runs}


    def schedules():
        from django_leasejobs.models import Schedule

        return {alias: list(Schedule.objects.using(alias).values_list("name", flat=True))
                for alias, names in tables().items() if PREFIX + "schedule" in names}


    def show(value):
        print("PROBE " + json.dumps(value))
"""

SETTINGS = """
DATABASES["jobs"] = {jobs!r}
LEASEJOBS_DATABASE = "jobs"
TASKS = {{"default": {{"BACKEND": "django_leasejobs.backends.LeaseJobsBackend"}}}}
DATABASE_ROUTERS = ["django_leasejobs.routers.JobsRouter"]
INSTALLED_APPS += ["notify"]
"""

URLS = """
from django.urls import include
from notify.views import signup

urlpatterns += [
    path("signup/", signup),
    path("jobs/api/", include("django_leasejobs.api.urls")),
    path("jobs/", include("django_leasejobs.urls")),
]
"""

PROJECT_TESTS = """
    import pytest

    from django_leasejobs.models import Job
    from notify.jobs import greet


    @pytest.mark.django_db(databases=["default", "jobs"])
    def test_the_helpers_use_the_queue_database(leasejobs):
        job = greet.enqueue("ann")
        assert job._state.db == "jobs"
        leasejobs.assert_enqueued(greet, args=["ann"])
        assert leasejobs.drain().succeeded == 1
        assert Job.objects.using("jobs").get(pk=job.pk).status == "succeeded"


    @pytest.mark.django_db(databases=["default", "jobs"], transaction=True)
    def test_a_burst_worker_runs_on_the_queue_database(leasejobs, leasejobs_worker):
        job = greet.enqueue("bob")
        assert leasejobs_worker.run().succeeded == 1
        assert Job.objects.using("jobs").get(pk=job.pk).status == "succeeded"
"""

BURST = ("runjobworker", "--burst", "--no-scheduler", "--concurrency", "1")


@pytest.fixture
def project_databases(tmp_path: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The project's ``default`` and ``jobs`` databases, new and empty."""
    with two_databases(tmp_path, ("app", "queue")) as made:
        yield made


@pytest.fixture
def project(tmp_path: Path, project_databases: tuple[dict[str, Any], dict[str, Any]]) -> NewProject:
    """The new project: data in ``default``, jobs in ``jobs`` (not migrated yet)."""
    default, jobs = project_databases
    made = start_project(tmp_path / "project", default)
    add_app(made, "notify", {"jobs": JOBS, "tasks": TASKS, "views": VIEWS, "probe": PROBE})
    add(made, "settings.py", SETTINGS.format(jobs=jobs))
    if django.VERSION < (6, 0):
        add(made, "settings.py", 'INSTALLED_APPS += ["django_tasks"]\n')  # the backport
    add(made, "urls.py", URLS)
    return made


@pytest.fixture
def migrated(project: NewProject) -> NewProject:
    ok(project.manage("migrate", "--database", "jobs"))
    ok(project.manage("migrate"))
    return project


def test_migrate_makes_the_tables_in_the_queue_database_and_nowhere_else(
    project: NewProject,
) -> None:
    first = project.manage("migrate")  # default first: the queue database is not migrated
    assert first.returncode != 0
    assert "leasejobs.E017" in first.stderr, first.stderr
    assert "migrate --database jobs" in first.stderr
    ok(project.manage("migrate", "--database", "jobs"))
    ok(project.manage("migrate"))
    tables = probe(project, "tables()")
    # API tokens point at users, so their table is the one that lives with them.
    assert tables["default"] == ["django_leasejobs_apitoken"]
    assert "django_leasejobs_job" in tables["jobs"]
    assert "django_leasejobs_deadletter" in tables["jobs"]
    assert "django_leasejobs_apitoken" not in tables["jobs"]
    checked = project.manage("check", "--database", "default", "--database", "jobs")
    assert "leasejobs.E" not in checked.stdout + checked.stderr
    assert checked.returncode == 0, checked.stderr


def test_a_request_enqueues_into_the_queue_database_and_a_worker_runs_it(
    migrated: NewProject,
) -> None:
    answer = probe(migrated, "signup('ann')")
    assert answer["status"] == 200
    assert answer["users"] == {"default": 1}
    job_id = answer["job"]
    assert probe(migrated, f"where({job_id})") == {"jobs": "pending"}
    out = ok(migrated.manage(*BURST))
    assert "\n  database:  jobs (" in out, out
    assert f"succeeded #{job_id} notify.jobs.greet" in out
    assert probe(migrated, f"where({job_id})") == {"jobs": "succeeded"}


def test_tasks_and_workflows_live_in_the_queue_database(migrated: NewProject) -> None:
    made = probe(migrated, "tasks_and_workflows()")
    assert probe(migrated, f"where({made['task']})") == {"jobs": "pending"}
    ok(migrated.manage(*BURST))
    done = probe(migrated, f"finished({made['task']}, {made['run']})")
    assert done == {"task": {"jobs": "succeeded"}, "value": 5, "runs": {"jobs": ["succeeded"]}}


def test_the_admin_the_api_and_the_commands_read_the_queue_database(migrated: NewProject) -> None:
    job_id = probe(migrated, "signup('bob')")["job"]
    stats = json.loads(ok(migrated.manage("jobstats", "--json")))
    assert stats["total"]["pending"] == 1, stats
    ok(migrated.manage(*BURST))
    seen = probe(migrated, f"operators({job_id})")
    assert seen == {
        "admin_list": 200,
        "admin_lists_job": True,
        "admin_change": 200,
        "dashboard": 200,
        "health": 200,
        "api": 200,
        "api_ids": [job_id],
        "api_status": "succeeded",
    }, seen
    assert json.loads(ok(migrated.manage("jobstats", "--json")))["total"]["pending"] == 0
    ok(migrated.manage("checkjobs"))
    nightly = {"job": "notify.jobs.greet", "cron": "0 3 * * *", "args": ["night"]}
    add(migrated, "settings.py", f"LEASEJOBS_SCHEDULES = {{'nightly': {nightly!r}}}\n")
    ok(migrated.manage("syncschedules"))  # one transaction, with row locks, in jobs
    assert probe(migrated, "schedules()") == {"jobs": ["nightly"]}
    pruned = ok(migrated.manage("prunejobs", "--succeeded-older-than", "0s"))
    assert "1" in pruned, pruned
    assert probe(migrated, f"where({job_id})") == {"jobs": None}


def test_the_project_s_own_tests_use_the_queue_database(project: NewProject) -> None:
    """pytest-django makes a test database for each alias (migrate puts the tables in the
    queue database's); the ``leasejobs`` fixtures then use it."""
    (project.root / "test_notify.py").write_text(textwrap.dedent(PROJECT_TESTS))
    (project.root / "pytest.ini").write_text("[pytest]\nDJANGO_SETTINGS_MODULE = shop.settings\n")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_notify.py"],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_the_setting_without_the_router_is_an_error(project: NewProject) -> None:
    add(project, "settings.py", "DATABASE_ROUTERS = []\n")
    done = project.manage("check")
    assert done.returncode != 0
    assert "leasejobs.E015" in done.stderr, done.stderr
    assert "django_leasejobs.routers.JobsRouter" in done.stderr


def test_the_router_without_the_setting_is_an_error(project: NewProject) -> None:
    add(project, "settings.py", "del LEASEJOBS_DATABASE\n")
    done = project.manage("check")
    assert done.returncode != 0
    assert "leasejobs.E016" in done.stderr, done.stderr


def test_an_unmigrated_queue_database_is_an_error_seen_from_default(project: NewProject) -> None:
    ok(project.manage("migrate", "--skip-checks"))  # default only: as if jobs were forgotten
    done = project.manage("check", "--database", "default")
    assert done.returncode != 0
    assert "leasejobs.E017" in done.stderr, done.stderr
    assert "The database 'jobs' has no django_leasejobs tables" in done.stderr
    worker = project.manage(*BURST)
    assert worker.returncode != 0
    assert "run `python manage.py migrate --database jobs` first" in worker.stderr
