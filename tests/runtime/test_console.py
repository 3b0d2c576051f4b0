"""The worker's lines for people: the banner, one line per attempt, and when each is written.

The project's own ``LOGGING`` decides only the per-attempt lines: a project that sends the
app's logger somewhere gets the structured log lines instead, never both. What a new project
sees through real processes is in ``acceptance/test_new_project.py``.
"""

from __future__ import annotations

import io
import logging
import re

import pytest
from django.core.management import call_command
from django.core.management.base import OutputWrapper
from django.db import connection
from testapp import jobs

from django_leasejobs.dialects.counting import Count, Kind
from django_leasejobs.models import Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime.console import (
    Console,
    command_logging,
    database_line,
    left_behind_line,
    logging_configured,
)
from django_leasejobs.runtime.worker import Worker

from ..conftest import fields
from ..invariants import wait_for
from .test_worker import Background

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"poll": 0.05, "scheduler": False, "lease": 5, "heartbeat": 0.1}


def test_logging_configured_when_the_project_sends_the_app_logger_somewhere() -> None:
    """This suite's project sends django_leasejobs to a console handler in its LOGGING; a new
    project's logger reaches none (``acceptance/test_new_project.py``: pytest adds its own
    capture handlers to every logger here, so the unconfigured case is only seen there)."""
    assert logging_configured()


def test_one_line_per_finished_attempt() -> None:
    out = io.StringIO()
    done = jobs.add.enqueue(1, 2)
    dead = jobs.permanent.enqueue()
    Worker(console=Console(OutputWrapper(out), attempts=True), **FAST).run(burst=True)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    took = r"in \d+\.\d{3} s"
    assert any(
        re.fullmatch(rf"\d\d:\d\d:\d\d succeeded #{done.pk} testapp\.jobs\.add {took}", line)
        for line in lines
    ), lines
    assert any(
        re.fullmatch(
            rf"\d\d:\d\d:\d\d dead      #{dead.pk} testapp\.jobs\.permanent {took}, attempt 1 "
            r"of \d+: PermanentError: .+",
            line,
        )
        for line in lines
    ), lines


def test_the_command_writes_no_attempt_line_when_logging_is_configured(caplog) -> None:
    """Never both: this project's LOGGING takes the app's records, so only they say it."""
    job = jobs.noop.enqueue()
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="django_leasejobs"):
        call_command("runjobworker", "--burst", "--no-scheduler", stdout=out)
    assert f"job.succeeded id={job.pk} " in caplog.text
    assert "succeeded #" not in out.getvalue()
    assert "\n  queues:    every queue\n" in out.getvalue()  # the banner is written anyway


def test_the_banner_lists_the_jobs_at_verbosity_2_and_is_silent_at_0() -> None:
    out = io.StringIO()
    call_command("runjobworker", "--burst", "--no-scheduler", "-v", "2", stdout=out)
    assert "\n    testapp.jobs.noop\n" in out.getvalue()
    assert re.search(r"^  database:  default \(\w+, ", out.getvalue(), re.M)
    quiet = io.StringIO()
    call_command("runjobworker", "--burst", "--no-scheduler", "-v", "0", stdout=quiet)
    assert "django-leasejobs" not in quiet.getvalue()


@pytest.mark.parametrize(
    ("host", "port", "shown"),
    [
        ("db.internal", "5432", "db.internal:5432"),
        ("db.internal", "", "db.internal"),
        ("db1,db2", "5432,5433", "db1:5432,db2:5433"),  # libpq's multi-host form
        ("db1,db2", "5432", "db1:5432,db2:5432"),  # one port for every host
        ("db1,db2", "", "db1,db2"),
    ],
)
def test_the_banner_names_each_server_with_its_port(
    monkeypatch: pytest.MonkeyPatch, host: str, port: str, shown: str
) -> None:
    """A primary and its standby used to read ``db1,db2:5432,5433``."""
    monkeypatch.setitem(connection.settings_dict, "HOST", host)
    monkeypatch.setitem(connection.settings_dict, "PORT", port)
    assert database_line("default").endswith(f" on {shown})")


def test_the_left_behind_line() -> None:
    assert left_behind_line([("emails", Count(3))], 0) == (
        "3 jobs due in queues this worker does not serve: emails (3)"
    )
    assert left_behind_line([("a", Count(1))], 0) == (
        "1 job due in queues this worker does not serve: a (1)"
    )
    assert left_behind_line([("a", Count(10_000, Kind.AT_LEAST)), ("b", Count(2))], 4) == (
        "10,002+ jobs due in queues this worker does not serve: a (10,000+), b (2), "
        "and 4 more queues"
    )


def test_command_logging_adds_no_handler_when_the_project_configured_one() -> None:
    """This suite's LOGGING takes the app's records: the command leaves the logger alone
    (a new project's case, where it adds one for its run, is acceptance/test_new_project.py)."""
    logger = logging.getLogger("django_leasejobs")
    before = list(logger.handlers)
    with command_logging(Console(OutputWrapper(io.StringIO())), OutputWrapper(io.StringIO())):
        assert logger.handlers == before
    assert logger.handlers == before


def test_a_deferred_job_has_one_console_line_that_says_why() -> None:
    out = io.StringIO()
    Console(OutputWrapper(out), attempts=True).finished(
        Job(pk=7, name="shop.gone.job"),
        Outcome.RELEASED,
        0.0,
        "'shop.gone.job' is not registered here",
        deferred=True,
    )
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d deferred  #7 shop\.gone\.job in 0\.000 s: 'shop\.gone\.job' is not "
        r"registered here\n",
        out.getvalue(),
    )


def test_a_stop_says_at_once_what_it_waits_for_and_a_release_how_long_the_job_ran() -> None:
    out = io.StringIO()
    long = jobs.sleep.enqueue(60, label="long")  # stops when its lease is taken back
    worker = Worker(console=Console(OutputWrapper(out), attempts=True), grace=0.3, **FAST)
    with Background(worker):
        wait_for(lambda: fields(long.pk, "status")["status"] == Status.RUNNING, what="running")
        worker.stop("signal SIGTERM")
        wait_for(lambda: "stopping" in out.getvalue(), what="the stopping line")
        assert "released" not in out.getvalue()  # said before the grace ran out
    stopping, released = out.getvalue().splitlines()
    assert re.fullmatch(
        rf"\d\d:\d\d:\d\d stopping \(signal SIGTERM\): waiting up to 0\.[23] s for 1 running job "
        rf"\(#{long.pk}\), then releasing it; a second Ctrl-C \(or SIGTERM\) exits now, "
        r"leaving it to its lease",
        stopping,
    ), stopping
    took = re.fullmatch(
        rf"\d\d:\d\d:\d\d released  #{long.pk} testapp\.jobs\.sleep in (\d+\.\d{{3}}) s", released
    )
    assert took is not None, released
    assert float(took[1]) >= 0.3  # it ran through the grace, not 0.000 s
