"""``runjobworker --reload`` in a new project: a code change restarts the worker, and the job in
flight at the change is released (unspent) and run again by the new code.

The project is made as a user makes one (tests/newproject.py) on the test database; the worker
runs as ``python manage.py runjobworker --reload`` in its own session, so the test can send
Ctrl-C to the whole group as a terminal does.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from django_leasejobs.models import Job, Status

from ..invariants import wait_for
from ..newproject import NewProject, database_like_the_tests, start_project

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

JOBS = """
    from django_leasejobs import job

    VERSION = {version}


    @job(takes_context=True)
    def publish(ctx):
        # The first code runs until its worker lets go of the job (a release sets lease_lost).
        while VERSION == 1 and not ctx.lease_lost:
            ctx.wait_cancelled(0.05)
        return f"published by v{{VERSION}}"
"""

LOGGING = """
LOGGING = {
    "version": 1,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django_leasejobs": {"handlers": ["stderr"], "level": "INFO"}},
}
"""

WORKER = ("runjobworker", "--reload", "--no-scheduler", "--concurrency", "2", "--poll", "0.1")


@pytest.fixture
def project(tmp_path: Path) -> NewProject:
    made = start_project(tmp_path, database_like_the_tests(connection.settings_dict["NAME"]))
    (tmp_path / "news").mkdir()
    (tmp_path / "news" / "__init__.py").write_text("")
    write_jobs(made, version=1)
    settings = made.root / "shop" / "settings.py"
    settings.write_text(settings.read_text() + "INSTALLED_APPS += ['news']\n" + LOGGING)
    return made


def write_jobs(project: NewProject, version: int) -> None:
    (project.root / "news" / "jobs.py").write_text(textwrap.dedent(JOBS.format(version=version)))


Started = tuple[subprocess.Popen[bytes], Path]


@pytest.fixture
def start(project: NewProject, tmp_path: Path) -> Iterator[Callable[..., Started]]:
    """Start the ``--reload`` worker (outer process and child in one session) with ``WORKER``
    and extra options; returns the process and its output file. Killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}

    def run(*extra: str) -> Started:
        log = tmp_path / f"worker-{len(started)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "manage.py", *WORKER, *extra],
                cwd=project.root,
                env={**env, "PYTHONUNBUFFERED": "1"},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(process)
        return process, log

    yield run
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def text(log: Path) -> str:
    return log.read_text(errors="replace")


def banners(log: Path) -> list[str]:
    """The worker id of each banner printed so far (one per start)."""
    return re.findall(r"^django-leasejobs \S+, worker (\S+)$", text(log), re.M)


def test_a_code_change_restarts_the_worker_and_its_job_in_flight_is_released_then_done(
    project: NewProject, start: Callable[..., Started]
) -> None:
    process, log = start()
    job = Job.objects.create(name="news.jobs.publish")
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.RUNNING, what="v1 runs it")
    assert len(banners(log)) == 1, text(log)
    write_jobs(project, version=2)

    def restarted() -> bool:
        # The reloader compares modification times once a second, from its first look on:
        # the change is made newer again until it sees one.
        path = project.root / "news" / "jobs.py"
        later = time.time() + 2
        os.utime(path, (later, later))
        return len(banners(log)) == 2

    wait_for(restarted, what="the restart")
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.SUCCEEDED, what="v2 runs it")
    row = Job.objects.get(pk=job.pk)
    assert (row.result, row.attempt, row.released, row.errors) == ("published by v2", 2, 1, [])
    first, second = banners(log)
    assert first != second  # a new process, a new worker id
    out = text(log)
    assert re.search(rf"job\.released id={job.pk} name=news\.jobs\.publish attempt=1 ", out), out
    assert f"worker.stopped id={first} reason=code changed: " in out
    assert process.poll() is None  # still watching

    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal reaches both processes
    assert process.wait(timeout=60) == 0, text(log)
    assert f"worker.stopped id={second} reason=reloader stopped" in text(log)


def test_a_worker_that_ends_on_its_own_ends_the_process(
    project: NewProject, start: Callable[..., Started]
) -> None:
    """``--max-jobs`` reached: no restart, the command's own exit status."""
    write_jobs(project, version=2)  # returns at once
    job = Job.objects.create(name="news.jobs.publish")
    process, log = start("--max-jobs", "1")
    assert process.wait(timeout=120) == 0, text(log)
    assert Job.objects.get(pk=job.pk).status == Status.SUCCEEDED
    assert len(banners(log)) == 1
    assert "reason=max_jobs=1 reached" in text(log)


def test_reload_is_refused_with_burst() -> None:
    with pytest.raises(CommandError, match=r"--reload runs the worker until stopped.*--burst"):
        call_command("runjobworker", "--reload", "--burst")
