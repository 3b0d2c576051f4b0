"""A new project reading its jobs through a real replica: the PostgreSQL and MariaDB lag tests.

Both make a project whose jobs live on a primary server and whose admin lists read through
``replica`` (``LEASEJOBS_READ_DATABASES = {"default": "replica"}``), stop the replica applying
what it receives, and read what the admin says about it; only the servers and how replay is
stopped differ. The project's ``notify/probe.py`` makes the superuser, enqueues and reads the
admin's pages, each call a ``manage.py shell`` of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..newproject import NewProject, add, add_app, ok, probe, start_project

PROBE = """
    import json

    from django.contrib.auth.models import User
    from django.test import Client

    from notify.jobs import greet


    def admin():
        boss = User.objects.filter(username="boss").first() or User.objects.create_superuser(
            "boss", "boss@example.com", "pw"
        )
        client = Client(HTTP_HOST="localhost")
        client.force_login(boss)
        return client


    def said(page):
        text = page.content.decode()
        return [line.strip() for line in text.splitlines() if "Read from the replica" in line]


    def enqueue():
        return greet.enqueue("late").pk


    def seen(job_id):
        client = admin()
        listing = client.get("/admin/django_leasejobs/job/")
        change = client.get(f"/admin/django_leasejobs/job/{job_id}/change/")
        dashboard = client.get("/admin/django_leasejobs/job/dashboard/")
        return {
            "listed": f"/admin/django_leasejobs/job/{job_id}/change/" in listing.content.decode(),
            "list_said": said(listing),
            "dashboard_said": said(dashboard),
            "change": change.status_code,
        }


    def show(value):
        print("PROBE " + json.dumps(value))
"""

JOBS = """
    from django_leasejobs import job


    @job
    def greet(name):
        return f"hello {name}"
"""


def lag_project(
    directory: Path, primary: dict[str, Any], replica: dict[str, Any], settings: str = ""
) -> NewProject:
    """The project on ``primary``, reading through ``replica``; migrated, with its superuser
    (made before a test stops replay). ``settings`` is appended to its settings."""
    project = start_project(directory, primary)
    add_app(project, "notify", {"jobs": JOBS, "probe": PROBE})
    add(
        project,
        "settings.py",
        f"DATABASES['replica'] = {replica!r}\n"
        + "LEASEJOBS_READ_DATABASES = {'default': 'replica'}\n"
        + settings
        + "INSTALLED_APPS += ['notify']\n",
    )
    ok(project.manage("migrate"))
    probe(project, "admin() and None")
    return project


def enqueued_unseen(project: NewProject) -> tuple[int, dict[str, Any]]:
    """A job enqueued while replay is stopped: not in the list (read on the replica), its own
    page there (read on the primary). Its id, and what the admin showed."""
    job_id: int = probe(project, "enqueue()")
    behind = probe(project, f"seen({job_id})")
    assert behind["listed"] is False, behind  # the list read the replica, which has not it
    assert behind["change"] == 200  # the job's page reads the primary
    return job_id, behind


def seen_caught_up(project: NewProject, job_id: int) -> dict[str, Any]:
    """What the admin shows once the replica caught up: the job listed, 0 s behind."""
    current = probe(project, f"seen({job_id})")
    assert current["listed"] is True, current
    assert "Read from the replica replica, 0.0 s behind." in current["list_said"][0], current
    return current
