"""jobqueue pause|resume|list, and how jobstats, checkjobs and the health view show a pause."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Pause
from django_leasejobs.reports import health, stats

from ...conftest import shifted

pytestmark = pytest.mark.django_db


def run(*args: Any, **options: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def check(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("checkjobs", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def age_pause(name: str, seconds: float) -> None:
    Pause.objects.filter(name=name).update(paused_at=shifted(-seconds))


def test_pause_resume_and_list() -> None:
    assert "Nothing is paused" in run("jobqueue", "list")
    assert "Paused queue mail" in run("jobqueue", "pause", "mail", "--by", "alice")
    assert "already paused" in run("jobqueue", "pause", "mail")
    assert "Paused job testapp.jobs.noop" in run("jobqueue", "pause", "testapp.jobs.noop", "--job")
    listed = run("jobqueue", "list")
    assert "queue mail" in listed
    assert "alice" in listed
    assert "job   testapp.jobs.noop" in listed
    as_json = json.loads(run("jobqueue", "list", "--json"))
    assert [(p["kind"], p["name"]) for p in as_json] == [
        ("job", "testapp.jobs.noop"),
        ("queue", "mail"),
    ]
    assert "Resumed queue mail" in run("jobqueue", "resume", "mail")
    assert "not paused" in run("jobqueue", "resume", "mail")
    assert [p.name for p in protocol.paused()] == ["testapp.jobs.noop"]


def test_the_pause_records_the_os_user_by_default() -> None:
    run("jobqueue", "pause", "mail")
    assert Pause.objects.get().paused_by.endswith("(manage.py)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("pause",), "needs a NAME"),
        (("resume",), "needs a NAME"),
        (("pause", "bad queue"), "queue"),
        (("pause", "has space", "--job"), "job name"),
        (("list", "mail"), "takes no NAME"),
        (("list", "--job"), "takes no NAME"),
    ],
)
def test_bad_input_is_a_command_error(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("jobqueue", *args)
    assert not Pause.objects.exists()


def test_an_unknown_action_is_refused_by_the_parser() -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        run("jobqueue", "stop", "mail")


def test_a_paused_queue_shows_its_age_and_is_not_unhealthy_for_waiting(all_due: Any) -> None:
    jobs.noop.enqueue(queue="mail")
    jobs.noop.enqueue(queue="other")
    all_due()
    protocol.pause(queue="mail")
    age_pause("mail", 600)
    numbers = stats.collect()
    mail = numbers.queues["mail"]
    assert (mail.pending, mail.due, mail.oldest_due_age) == (1, 0, 0.0)
    assert mail.paused_age is not None
    assert mail.paused_age >= 600
    assert numbers.queues["other"].paused_age is None
    assert numbers.queues["other"].oldest_due_age > 0
    assert numbers.total.paused_age is None
    code, out = check("--max-due-age", "3600", "--queue", "mail")
    assert code == 0, out
    assert "paused: mail 10m" in out
    [mail_line] = [line for line in run("jobstats").splitlines() if line.startswith("mail ")]
    assert mail_line.rstrip().endswith("10m00s")
    assert json.loads(run("jobstats", "--json"))["queues"]["mail"]["paused_age"] >= 600


def test_a_paused_job_name_is_left_out_of_due_and_listed(all_due: Any) -> None:
    jobs.noop.enqueue()
    jobs.add.enqueue(1, 2)
    all_due()
    protocol.pause(job=jobs.noop.name)
    numbers = stats.collect()
    assert numbers.queues["default"].due == 1
    assert numbers.queues["default"].pending == 2
    assert set(numbers.paused_jobs) == {jobs.noop.name}
    assert f"paused job {jobs.noop.name}" in run("jobstats")


def test_a_queue_paused_too_long_pages() -> None:
    protocol.pause(queue="mail")
    assert check("--paused-max", "30m")[0] == 0
    age_pause("mail", 3601)
    code, out = check("--paused-max", "1h")
    assert code == 1
    assert "UNHEALTHY queue 'mail': paused for 36" in out
    assert "more than 3600 s" in out
    assert check("--paused-max", "2h")[0] == 0
    assert check("--paused-max", "1h", "--queue", "other")[0] == 0


def test_a_job_name_paused_too_long_pages_too() -> None:
    protocol.pause(job=jobs.noop.name)
    assert check("--paused-max", "30m")[0] == 0
    age_pause(jobs.noop.name, 3601)
    code, out = check("--paused-max", "1h")
    assert code == 1
    assert f"UNHEALTHY job '{jobs.noop.name}': paused for 36" in out
    assert check("--paused-max", "2h")[0] == 0


@pytest.mark.parametrize("bad", ["soon", "-5m", "1x"])
def test_paused_max_refuses_bad_durations(bad: str) -> None:
    with pytest.raises(CommandError, match="paused-max"):
        call_command("checkjobs", max_paused_age=bad)


def test_paused_max_refuses_bad_durations_on_the_command_line() -> None:
    with pytest.raises(CommandError, match="paused-max"):
        run("checkjobs", "--paused-max", "soon")


@override_settings(LEASEJOBS_HEALTH_MAX_PAUSED_AGE=60)
def test_the_setting_is_a_threshold_of_the_probes() -> None:
    protocol.pause(queue="mail")
    age_pause("mail", 120)
    problems = health.evaluate(stats.collect(), health.Thresholds.from_settings())
    assert [(p.queue, p.metric) for p in problems] == [("mail", "paused_age")]
    assert "jobqueue resume" in str(problems[0])


def test_pausing_a_job_name_that_names_no_job_is_refused() -> None:
    with pytest.raises(CommandError, match=r"Did you mean 'testapp\.jobs\.noop'"):
        run("jobqueue", "pause", "testapp.jobs.nop", "--job")
    assert not Pause.objects.exists()
