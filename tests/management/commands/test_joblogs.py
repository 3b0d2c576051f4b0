"""``manage.py joblogs ID``: a job's logs, a line per record or as JSON; bad ids refused."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from testapp import jobs

from django_leasejobs.upkeep import AttemptLogs, store_logs

pytestmark = pytest.mark.django_db

LINE = {"level": "INFO", "logger": "shop", "message": "one\ntwo", "at": "2026-01-01T00:00:00Z"}


def run(*argv: str) -> str:
    out = io.StringIO()
    call_command("joblogs", *argv, stdout=out)
    return out.getvalue()


def test_prints_each_record_and_the_dropped_count() -> None:
    job = jobs.noop.enqueue()
    store_logs([AttemptLogs(job.pk, 1, [LINE, {"dropped": 3}], 10)])
    store_logs([AttemptLogs(job.pk, 2, [{**LINE, "level": "ERROR", "message": "x"}], 10)])
    assert run(str(job.pk)).splitlines() == [
        "attempt 1  2026-01-01T00:00:00Z  INFO  shop  one",
        "    two",
        "attempt 1  ... 3 records dropped ...",
        "attempt 2  2026-01-01T00:00:00Z  ERROR  shop  x",
    ]
    assert json.loads(run(str(job.pk), "--json"))["logs"][0] == {"attempt": 1, **LINE}


def test_a_job_without_logs_says_so() -> None:
    job = jobs.noop.enqueue()
    assert run(str(job.pk)) == f"Job #{job.pk} has no logs.\n"
    assert json.loads(run(str(job.pk), "--json")) == {"logs": []}


def test_an_unknown_job_is_an_error() -> None:
    with pytest.raises(CommandError, match=r"There is no job #999999\."):
        run("999999")


@pytest.mark.parametrize("bad", ["x", "0", "-1", "+5", "1.5", "9" * 30])
def test_a_bad_id_is_refused_by_the_parser(bad: str) -> None:
    with pytest.raises(CommandError, match="invalid job id value"):
        run(bad)
