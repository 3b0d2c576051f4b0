"""The first hour of a new project: what ``runjobworker`` and ``checkjobs`` show its user.

A project made by ``django-admin startproject`` (tests/newproject.py), with Django's own
settings (no ``LOGGING``) and one app, ``notify``, whose jobs use two queues. Its commands run
as subprocesses on the test database; the jobs are enqueued by the project's own code
(``manage.py shell``), as its user would.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import F

from django_leasejobs.models import Job, Status

from ..newproject import NewProject, database_like_the_tests, start_project

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

JOBS = """
    from django_leasejobs import Backoff, PermanentError, job


    @job
    def greet(name):
        return f"hello {name}"


    @job(queue="reports")
    def report():
        return "report"


    @job
    def refuse():
        raise PermanentError("refused")


    @job(max_attempts=3, backoff=Backoff(base=3600, cap=3600, jitter="none"))
    def flaky():
        raise ConnectionError("gateway timeout")
"""

LOGGING = """
LOGGING = {
    "version": 1,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django_leasejobs": {"handlers": ["stderr"], "level": "INFO"}},
}
"""

BURST = ("runjobworker", "--burst", "--no-scheduler", "--concurrency", "1")


@pytest.fixture
def project(tmp_path: Path) -> NewProject:
    """The new project, on the test database, with the ``notify`` app installed."""
    made = start_project(tmp_path, database_like_the_tests(connection.settings_dict["NAME"]))
    (tmp_path / "notify").mkdir()
    (tmp_path / "notify" / "__init__.py").write_text("")
    (tmp_path / "notify" / "jobs.py").write_text(textwrap.dedent(JOBS))
    add_settings(made, "INSTALLED_APPS += ['notify']\n")
    return made


def add_settings(project: NewProject, text: str) -> None:
    settings = project.root / "shop" / "settings.py"
    settings.write_text(settings.read_text() + text)


def enqueue(project: NewProject, *calls: str) -> list[int]:
    """Enqueue from the project's code (``greet.enqueue('ann')``); the new jobs' ids."""
    code = "from notify.jobs import *\n" + "\n".join(f"print('id', {call}.pk)" for call in calls)
    done = project.manage("shell", "-c", code)
    assert done.returncode == 0, done.stderr
    return [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("id ")]


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def status(job_id: int) -> str:
    return Job.objects.get(pk=job_id).status


def test_the_worker_shows_a_banner_then_one_line_per_attempt(project: NewProject) -> None:
    greeted, reported, refused, flaked = enqueue(
        project, "greet.enqueue('ann')", "report.enqueue()", "refuse.enqueue()", "flaky.enqueue()"
    )
    out = ok(project.manage(*BURST))
    vendor = connection.vendor
    assert re.search(r"^django-leasejobs \S+, worker \S+-\d+-[0-9a-f]{8}$", out, re.M), out
    assert re.search(rf"^  database:  default \({vendor}, ", out, re.M), out
    assert "\n  queues:    every queue\n" in out  # no --queues, no LEASEJOBS_QUEUES
    assert "\n  jobs:      4 registered\n" in out
    assert "notify.jobs.greet" not in out.split("jobs:")[1].split("capacity:")[0]
    assert "\n  capacity:  1 threads, no async slots (no async handler)\n" in out
    assert "\n  lease:     60 s, heartbeat every 15 s, polling every 1 s\n" in out
    clock = r"^\d\d:\d\d:\d\d "
    took = r"in \d+\.\d{3} s"
    assert re.search(rf"{clock}succeeded #{greeted} notify\.jobs\.greet {took}$", out, re.M)
    assert re.search(rf"{clock}succeeded #{reported} notify\.jobs\.report {took}$", out, re.M)
    assert re.search(
        rf"{clock}dead      #{refused} notify\.jobs\.refuse {took}, attempt 1 of 5: "
        r"PermanentError: refused$",
        out,
        re.M,
    ), out
    assert re.search(
        rf"{clock}failed    #{flaked} notify\.jobs\.flaky {took}, attempt 1 of 3, retried "
        r"later: ConnectionError: gateway timeout$",
        out,
        re.M,
    ), out
    assert len(re.findall(clock, out, re.M)) == 4  # one line per attempt, nothing twice
    assert (status(greeted), status(reported)) == (Status.SUCCEEDED, Status.SUCCEEDED)


def test_verbosity_names_the_jobs_or_silences_the_worker(project: NewProject) -> None:
    enqueue(project, "greet.enqueue('bob')")
    detailed = ok(project.manage(*BURST, "-v", "2"))
    listed = detailed.split("  jobs:      4 registered\n")[1].split("  capacity:")[0]
    assert listed.split() == [
        "notify.jobs.flaky",
        "notify.jobs.greet",
        "notify.jobs.refuse",
        "notify.jobs.report",
    ]
    enqueue(project, "greet.enqueue('cy')")
    quiet = ok(project.manage(*BURST, "-v", "0"))
    assert "django-leasejobs" not in quiet
    assert "succeeded #" not in quiet
    assert Job.objects.filter(status=Status.SUCCEEDED).count() == 2


def test_without_logging_each_event_is_one_line_on_one_stream(project: NewProject) -> None:
    """No LOGGING: a dead or deferred job's line is the console's alone (Python's last-resort
    handler printed the app's warning as well, on stderr); at verbosity 0, the warning alone."""
    refused, moved = enqueue(project, "refuse.enqueue()", "greet.enqueue('gil')")
    renamed = f"from django_leasejobs.models import Job; Job.objects.filter(pk={moved})"
    ok(project.manage("shell", "-c", renamed + ".update(name='notify.gone.job')"))
    done = project.manage(*BURST)
    out = ok(done)
    for job_id in (refused, moved):
        lines = [
            line
            for line in (out + done.stderr).splitlines()
            if re.search(rf"#{job_id}\b|id={job_id}\b", line)
        ]
        assert len(lines) == 1, out + done.stderr
    assert re.search(rf"^\d\d:\d\d:\d\d dead      #{refused} notify\.jobs\.refuse ", out, re.M)
    assert re.search(
        rf"^\d\d:\d\d:\d\d deferred  #{moved} notify\.gone\.job in \d+\.\d{{3}} s: "
        r"'notify\.gone\.job' is not registered here: there is no module 'notify\.gone'$",
        out,
        re.M,
    ), out
    assert "job." not in done.stderr
    # The deferred job stays out of the next run, however long that one takes to start.
    Job.objects.filter(pk=moved).update(run_at=F("run_at") + dt.timedelta(hours=1))
    (again,) = enqueue(project, "refuse.enqueue()")
    quiet = project.manage(*BURST, "-v", "0")
    assert f"#{again}" not in ok(quiet)  # no console line at verbosity 0
    assert [line.split()[:2] for line in quiet.stderr.splitlines()] == [
        ["job.dead", f"id={again}"]
    ], quiet.stderr


def test_a_project_that_configures_logging_gets_log_lines_instead(project: NewProject) -> None:
    add_settings(project, LOGGING)
    (greeted,) = enqueue(project, "greet.enqueue('dee')")
    done = project.manage(*BURST)
    out = ok(done)
    assert "\n  queues:    every queue\n" in out  # the banner, whatever LOGGING says
    assert "succeeded #" not in out
    assert f"job.succeeded id={greeted} name=notify.jobs.greet " in done.stderr


def test_queues_restrict_the_worker_and_burst_names_what_it_left(project: NewProject) -> None:
    greeted, first, second = enqueue(
        project, "greet.enqueue('eve')", "report.enqueue()", "report.enqueue()"
    )
    out = ok(project.manage(*BURST, "--queues", "default"))
    assert "\n  queues:    default\n" in out
    assert status(greeted) == Status.SUCCEEDED
    assert (status(first), status(second)) == (Status.PENDING, Status.PENDING)
    assert out.endswith("2 jobs due in queues this worker does not serve: reports (2)\n")
    out = ok(project.manage(*BURST))
    assert (status(first), status(second)) == (Status.SUCCEEDED, Status.SUCCEEDED)
    assert "not serve" not in out


def test_declared_queues_are_the_default_and_are_checked_at_start(project: NewProject) -> None:
    add_settings(project, "LEASEJOBS_QUEUES = ['default']\n")
    refused = project.manage(*BURST)
    assert refused.returncode == 1
    assert "(leasejobs.E012) Job 'notify.jobs.report' goes to queue 'reports'" in refused.stderr
    add_settings(project, "LEASEJOBS_QUEUES = ['reports']\n")
    refused = project.manage(*BURST)
    assert refused.returncode == 1
    assert "(leasejobs.E013) LEASEJOBS_DEFAULT_QUEUE is 'default'" in refused.stderr
    add_settings(project, "LEASEJOBS_QUEUES = ['default', 'reports']\n")
    greeted, reported = enqueue(project, "greet.enqueue('fay')", "report.enqueue()")
    out = ok(project.manage(*BURST))
    assert "\n  queues:    default, reports\n" in out
    assert (status(greeted), status(reported)) == (Status.SUCCEEDED, Status.SUCCEEDED)


def test_checkjobs_fails_by_default_for_a_queue_no_worker_serves(
    project: NewProject, make_due
) -> None:
    (reported,) = enqueue(project, "report.enqueue()")
    make_due(reported, seconds_ago=120)
    done = project.manage("checkjobs")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("UNHEALTHY queue 'reports': due jobs have waited 12")
    assert "no live worker serves this queue" in done.stdout
    ok(project.manage(*BURST, "--queues", "reports"))
    assert ok(project.manage("checkjobs")).startswith("OK: every queue within limits")
