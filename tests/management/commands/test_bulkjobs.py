"""manage.py bulkjobs: a dry run, --yes, the user of the log entry, and bad options refused."""

from __future__ import annotations

import io

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure

from ...conftest import fields, shifted

pytestmark = pytest.mark.django_db


def bulkjobs(*argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("bulkjobs", *argv, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def operator() -> User:
    return User.objects.create_user("ops")


def test_a_dry_run_says_how_many_and_changes_nothing() -> None:
    job = jobs.noop.using(queue="mail").enqueue()
    out, _ = bulkjobs("cancel", "--queue", "mail", "--dry-run")
    assert out == 'Would cancel 1 job(s) matching {"queue": "mail"}.\n'
    assert fields(job.pk, "status")["status"] == Status.PENDING


def test_without_yes_it_refuses_saying_what_it_would_do() -> None:
    job = jobs.noop.using(queue="mail").enqueue()
    with pytest.raises(CommandError, match=r"Would cancel 1 job\(s\) .* Add --yes to cancel"):
        bulkjobs("cancel", "--queue", "mail")
    assert fields(job.pk, "status")["status"] == Status.PENDING
    assert not LogEntry.objects.exists()


def test_cancel_with_yes_logs_under_the_user_named_by(operator) -> None:
    one = jobs.noop.using(queue="mail").enqueue()
    two = jobs.noop.using(queue="mail").enqueue()
    out, _ = bulkjobs(
        "cancel",
        "--queue",
        "mail",
        "--status",
        "pending,failed",
        "--yes",
        "--by",
        "ops",
        "--batch",
        "1",
    )
    assert out == "Bulk cancel: 2 matched; cancelled 2, cancel requested 0; left 0.\n"
    assert {fields(job.pk, "status")["status"] for job in (one, two)} == {Status.CANCELLED}
    (entry,) = LogEntry.objects.all()
    assert entry.user_id == operator.pk
    assert entry.change_message.startswith(
        'Bulk cancel (bulkjobs command) of the jobs matching {"queue": "mail", "status": '
        '["pending", "failed"]}: 2 matched;'
    )


def test_the_os_user_is_the_default(operator, monkeypatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "ops")
    jobs.noop.using(queue="mail").enqueue()
    bulkjobs("cancel", "--queue", "mail", "--yes")
    assert LogEntry.objects.get().user_id == operator.pk


def test_an_unknown_user_is_refused_before_anything_changes(monkeypatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "root")
    job = jobs.noop.using(queue="mail").enqueue()
    with pytest.raises(CommandError, match=r"No user 'root' in this project.*--by USERNAME"):
        bulkjobs("cancel", "--queue", "mail", "--yes")
    assert fields(job.pk, "status")["status"] == Status.PENDING


def test_retry_replays_dead_jobs_and_names_the_refused(operator) -> None:
    job = jobs.add.using(queue="mail", max_attempts=1, dedupe_key="k").enqueue(1, 2)
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (claimed,) = protocol.claim("cmd", batch=1)
    protocol.fail(claimed.pk, claimed.attempt, Failure("OSError: down"))
    holder = jobs.add.using(queue="mail", dedupe_key="k").enqueue(3, 4)
    out, err = bulkjobs("retry", "--status", "dead", "--error", "down", "--yes", "--by", "ops")
    assert out == "Bulk retry: 1 matched; replayed 0; left 1.\n"
    assert f"refused job #{job.pk}: Job {holder.pk} already holds dedupe key 'k'" in err
    Job.objects.filter(pk=holder.pk).update(status=Status.CANCELLED, live_dedupe_key=None)
    out, _ = bulkjobs("retry", "--status", "dead", "--yes", "--by", "ops")
    assert out == "Bulk retry: 1 matched; replayed 1; left 0.\n"
    assert DeadLetter.objects.get(job=job).replayed_job_id is not None


def test_nothing_matched_is_nothing_to_do() -> None:
    out, _ = bulkjobs("delete", "--queue", "mail")
    assert out == 'No job matches {"queue": "mail"}: nothing to delete.\n'


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["cancel"], "The filter is empty"),
        (["cancel", "--status", "done"], "--status: status must be one of"),
        (["retry", "--status", "pending"], "--status: retry acts on dead jobs only"),
        (["cancel", "--created-before", "yesterday"], "--created-before: created_before must"),
        (["cancel", "--finished-after", "2025-01-01T00:00:00"], "must say its UTC offset"),
        (["cancel", "--queue", "a", "--batch", "0"], "argument --batch: must be between"),
    ],
)
def test_bad_options_are_refused(argv, words) -> None:
    with pytest.raises(CommandError, match=words):
        bulkjobs(*argv)


def test_an_unknown_action_is_refused_by_argparse() -> None:
    with pytest.raises(CommandError, match="invalid choice: 'purge'"):
        bulkjobs("purge", "--queue", "a")
