"""checkjobs and jobstats with several queue databases: every database judged and shown, each
problem naming its own, and one that cannot be read reported while the others still are.

Two real databases of the test run's engine: ``default`` and ``shard`` (testproject's settings).
Time moves by updating ``run_at`` in the database that holds the job.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

import pytest
from django.db import connections
from django.test import override_settings
from testapp import jobs

from django_leasejobs.models import Job
from django_leasejobs.models.databases import using_database

from ...conftest import shifted, worker_row
from .test_monitoring_commands import check, run

pytestmark = pytest.mark.django_db(databases=["default", "shard"])

BOTH = pytest.mark.django_db(databases=["default", "shard"], transaction=True)
ROUTES = {"reports": "shard"}


@pytest.fixture(autouse=True)
def shards() -> Iterator[None]:
    with override_settings(
        LEASEJOBS_QUEUE_DATABASES=ROUTES, LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None
    ):
        yield


def due(job: Job, seconds_ago: float) -> None:
    """Make ``job`` due ``seconds_ago``, in the database that holds it."""
    alias = job._state.db
    assert alias is not None
    Job.objects.using(alias).filter(pk=job.pk).update(run_at=shifted(-seconds_ago))


def number_after(words: str, line: str) -> int:
    """The whole number that follows ``words`` in ``line``."""
    found = re.search(re.escape(words) + r" (\d+)", line)
    assert found is not None, line
    return int(found.group(1))


def report() -> Job:
    job = jobs.noop.using(queue="reports").enqueue()
    assert job._state.db == "shard"
    return job


@contextlib.contextmanager
def unreadable(alias: str) -> Iterator[None]:
    """The jobs table of ``alias`` gone for the block (renamed, then renamed back: MySQL
    commits DDL at once, so the test is a transactional one on every engine)."""
    with connections[alias].cursor() as cursor:
        cursor.execute("ALTER TABLE django_leasejobs_job RENAME TO leasejobs_gone")
    try:
        yield
    finally:
        with connections[alias].cursor() as cursor:
            cursor.execute("ALTER TABLE leasejobs_gone RENAME TO django_leasejobs_job")


# --------------------------------------------------------------------------- checkjobs


def test_a_stalled_queue_in_a_shard_fails_naming_its_database() -> None:
    due(report(), seconds_ago=900)
    due(jobs.noop.enqueue(), seconds_ago=5)
    status, output = check("--max-due-age", "300")
    assert status == 1
    (line,) = output.splitlines()
    assert line.startswith("UNHEALTHY [shard] queue 'reports': the oldest due job has waited 9")
    assert 900 <= number_after("has waited", line) < 960
    assert line.endswith(
        "more than 300 s: no worker is taking jobs from this queue, or workers are too few"
    )
    assert check("--max-due-age", "300", "--queue", "default")[0] == 0
    assert check("--max-due-age", "300", "--queue", "reports")[0] == 1


def test_every_database_is_judged_and_each_ok_line_names_its_own() -> None:
    due(report(), seconds_ago=600)
    due(jobs.noop.enqueue(queue="mail"), seconds_ago=700)
    status, output = check("--max-due-age", "300")
    assert status == 1
    lines = output.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("UNHEALTHY [default] queue 'mail': the oldest due job has waited")
    assert lines[1].startswith("UNHEALTHY [shard] queue 'reports': the oldest due job has waited")
    status, output = check("--max-due-age", "15m")
    assert status == 0
    lines = output.splitlines()
    assert lines[0].startswith("OK: [default] every queue within limits (oldest due age ")
    assert lines[1].startswith("OK: [shard] every queue within limits (oldest due age ")
    assert 700 <= number_after("oldest due age", lines[0]) < 760
    assert 600 <= number_after("oldest due age", lines[1]) < 660


def test_a_home_worker_does_not_serve_a_shard_s_queues() -> None:
    worker_row("home-worker", queues="*")  # its row is in default: it serves default only
    due(report(), seconds_ago=120)
    due(jobs.noop.enqueue(), seconds_ago=120)
    status, output = check("--max-unserved-age", "60")
    assert status == 1
    (line,) = output.splitlines()
    assert line.startswith("UNHEALTHY [shard] queue 'reports': due jobs have waited ")
    assert 120 <= number_after("have waited", line) < 180
    assert line.endswith("with --queues reports, and --database shard")
    with using_database("shard"):
        worker_row("shard-worker", queues="reports")
    assert check("--max-unserved-age", "60")[0] == 0


def test_a_route_to_the_home_database_changes_nothing() -> None:
    with override_settings(LEASEJOBS_QUEUE_DATABASES={"reports": "default"}):
        due(jobs.noop.using(queue="reports").enqueue(), seconds_ago=900)
        status, output = check("--max-due-age", "300")
    assert status == 1
    assert output.startswith("UNHEALTHY queue 'reports': the oldest due job has waited 9")


@BOTH
def test_a_database_that_cannot_be_read_is_a_problem_and_the_others_are_judged() -> None:
    due(jobs.noop.enqueue(queue="mail"), seconds_ago=900)
    with unreadable("shard"):
        status, output = check("--max-due-age", "300")
    assert status == 1
    lines = output.splitlines()
    assert lines[0].startswith("UNHEALTHY [default] queue 'mail': the oldest due job has waited")
    assert lines[1].startswith("UNHEALTHY [shard] cannot read the jobs table: ")
    assert "Traceback" not in output
    assert check("--max-due-age", "20m")[0] == 0  # the table is back


# --------------------------------------------------------------------------- jobstats


HEADING = "Jobs in database "


def blocks(output: str) -> dict[str, list[str]]:
    """jobstats' table by database: the heading's alias -> the block's lines."""
    found: dict[str, list[str]] = {}
    for block in output.strip().split("\n\n" + HEADING):
        block = HEADING + block.removeprefix(HEADING)
        alias, _, _ = block.removeprefix(HEADING).partition(" ")
        found[alias.rstrip(":")] = block.splitlines()
    return found


def queue_rows(lines: list[str]) -> dict[str, list[str]]:
    end = lines.index("")
    return {line.split()[0]: line.split()[1:] for line in lines[2:end]}


def test_jobstats_shows_a_table_per_database() -> None:
    due(report(), seconds_ago=125)
    jobs.noop.enqueue(delay=3600)
    found = blocks(run("jobstats"))
    assert list(found) == ["default", "shard"]
    assert found["default"][0].startswith("Jobs in database default at ")
    assert found["shard"][0].startswith("Jobs in database shard at ")
    home, shard = queue_rows(found["default"]), queue_rows(found["shard"])
    assert set(home) == {"default", "TOTAL"}
    assert home["default"][:2] == ["1", "0"]
    assert set(shard) == {"reports", "TOTAL"}
    assert shard["reports"][:2] == ["1", "1"]
    assert shard["reports"][-2].startswith("2m0")
    assert found["shard"][-1] == "workers: none seen"


def test_jobstats_json_has_the_totals_and_each_database() -> None:
    due(report(), seconds_ago=30)
    jobs.noop.enqueue(delay=3600)
    data = json.loads(run("jobstats", "--json"))
    assert set(data) == {"total", "databases"}
    assert list(data["databases"]) == ["default", "shard"]
    assert (data["total"]["pending"], data["total"]["due"]) == (2, 1)
    home, shard = data["databases"]["default"], data["databases"]["shard"]
    assert list(home["queues"]) == ["default"]
    assert list(shard["queues"]) == ["reports"]
    assert 30 <= shard["queues"]["reports"]["oldest_due_age"] < 90
    assert shard["workflow_runs"]["running"] == 0
    assert "read_from" not in shard


@override_settings(LEASEJOBS_READ_DATABASES={"shard": "shard"})
def test_jobstats_reads_each_database_s_own_replica() -> None:
    # The shard as its own replica: the suite has no replica alias of its own.
    report()
    data = json.loads(run("jobstats", "--json"))
    assert data["databases"]["shard"]["read_from"]["database"] == "shard"
    assert "read_from" not in data["databases"]["default"]
    found = blocks(run("jobstats"))
    assert (
        found["shard"][-1] == "Read from the replica shard (not a standby: its rows are current)."
    )
    assert not any("replica" in line for line in found["default"])


def test_jobstats_leases_per_database() -> None:
    entries = json.loads(run("jobstats", "--leases", "--json"))
    by_database: dict[str, set[str]] = {}
    for entry in entries:
        by_database.setdefault(entry["database"], set()).add(entry["name"])
    assert set(by_database) == {"default", "shard"}
    assert jobs.noop.name in by_database["shard"]
    output = run("jobstats", "--leases")
    assert "Runs of the last 7 day(s) in database default, by job name" in output
    assert "Runs of the last 7 day(s) in database shard, by job name" in output


@BOTH
def test_jobstats_says_which_database_it_cannot_read_and_shows_the_others() -> None:
    jobs.noop.enqueue()
    with unreadable("shard"):
        found = blocks(run("jobstats"))
        data = json.loads(run("jobstats", "--json"))
    assert found["shard"][0].startswith("Jobs in database shard: cannot read the jobs table: ")
    assert queue_rows(found["default"])["default"][0] == "1"
    assert data["databases"]["shard"]["error"].startswith("cannot read the jobs table")
    assert data["total"]["pending"] == 1
