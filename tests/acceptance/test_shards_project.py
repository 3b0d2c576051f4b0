"""Shards in a new project: queue ``reports`` routed to a second database, ``jobs2``.

A project made by ``startproject`` (tests/newproject.py) with ``default`` and ``jobs2`` on the
test run's server and ``LEASEJOBS_QUEUE_DATABASES = {"reports": "jobs2"}``, used as its user
would: ``migrate`` each database, enqueue from the project's code, one ``runjobworker`` per
database, each a subprocess. What landed where is read back by the project's own code.
"""

from __future__ import annotations

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


    @job(queue="reports")
    def report(day):
        return f"report {day}"
"""

TASKS = """
    try:
        from django.tasks import task
    except ImportError:  # Django 5.2: the backport
        from django_tasks import task


    @task(queue_name="reports")
    def add(a, b):
        return a + b
"""

PROBE = """
    import json

    from django.db import connections

    from django_leasejobs.errors import JobValidationError
    from django_leasejobs.models import Job
    from notify.jobs import greet, report
    from notify.tasks import add


    def enqueue():
        made = {"greet": greet.enqueue("ann").pk, "report": report.enqueue("mon").pk,
                "task": add.enqueue(2, 3).id}
        try:
            greet.enqueue_many([(("bob",), {}), {"args": ["cy"], "queue": "reports"}])
        except JobValidationError as exc:
            made["refused"] = str(exc)
        return made


    def where():
        return {alias: sorted(Job.objects.using(alias).values_list("queue", "status"))
                for alias in connections}


    def results(task_id, report_id):
        return {"task": add.get_result(task_id).return_value,
                "report": report.get_result(report_id).result}


    def show(value):
        print("PROBE " + json.dumps(value))
"""

SETTINGS = """
DATABASES["jobs2"] = {jobs2!r}
LEASEJOBS_QUEUE_DATABASES = {{"reports": "jobs2"}}
TASKS = {{
    "default": {{
        "BACKEND": "django_leasejobs.backends.LeaseJobsBackend",
        "QUEUES": ["default", "reports"],
    }}
}}
INSTALLED_APPS += ["notify"]
"""

BURST = ("runjobworker", "--burst", "--no-scheduler", "--concurrency", "1")


@pytest.fixture
def project(tmp_path: Path) -> Iterator[NewProject]:
    with two_databases(tmp_path, ("app", "jobs2")) as (default, jobs2):
        made = start_project(tmp_path / "project", default)
        add_app(made, "notify", {"jobs": JOBS, "tasks": TASKS, "probe": PROBE})
        add(made, "settings.py", SETTINGS.format(jobs2=jobs2))
        if django.VERSION < (6, 0):
            add(made, "settings.py", 'INSTALLED_APPS += ["django_tasks"]\n')  # the backport
        yield made


def test_each_queue_lives_and_runs_in_its_own_database(project: NewProject) -> None:
    first = project.manage("migrate")  # the shard is not migrated yet: said, with the fix
    assert first.returncode != 0
    assert "leasejobs.E017" in first.stderr, first.stderr
    assert "LEASEJOBS_QUEUE_DATABASES sends 'reports' to it" in first.stderr
    assert "migrate --database jobs2" in first.stderr
    assert "docs/databases.md#shards-queues-in-several-databases" in first.stderr
    ok(project.manage("migrate", "--database", "jobs2"))
    ok(project.manage("migrate"))

    made: dict[str, Any] = probe(project, "enqueue()")
    assert "enqueue_many would be written in 2 databases" in made["refused"]
    assert made["task"] == f"jobs2:{made['report'] + 1}"  # a shard's ids say where they are
    assert probe(project, "where()") == {
        "default": [["default", "pending"]],
        "jobs2": [["reports", "pending"], ["reports", "pending"]],
    }

    out = ok(project.manage(*BURST, "--database", "jobs2"))
    assert "\n  database:  jobs2 (" in out, out
    assert probe(project, "where()") == {
        "default": [["default", "pending"]],
        "jobs2": [["reports", "succeeded"], ["reports", "succeeded"]],
    }
    assert probe(project, f"results({made['task']!r}, {made['report']})") == {
        "task": 5,
        "report": "report mon",
    }
    refused = project.manage(*BURST, "--database", "jobs2", "--queues", "default")
    assert refused.returncode != 0
    assert "queues default in 'default', not in 'jobs2'" in refused.stderr

    out = ok(project.manage(*BURST))
    assert "\n  database:  default (" in out, out
    assert probe(project, "where()")["default"] == [["default", "succeeded"]]
