"""Operators' commands with shards: ``--database ALIAS`` acts on that queue database's rows,
``prunejobs`` prunes every queue database (or the one named), and a shard's worker prunes its
own database by ``LEASEJOBS_RETENTION``.

Ids repeat across databases: every test makes a row in ``default`` and one in ``shard`` with
the same id (``reset_sequences`` starts both tables at 1; ``twins`` asserts they met), so a
command that read the wrong database would change the wrong row. Rows are counted per alias
with the ORM.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from testapp import jobs

from django_leasejobs import Workflow, protocol
from django_leasejobs.models import DeadLetter, Job, JobLog, RunStatus, Status, WorkflowRun
from django_leasejobs.models.databases import using_database
from django_leasejobs.protocol import Failure
from django_leasejobs.runtime.worker import Worker

from ..conftest import shifted

pytestmark = pytest.mark.django_db(
    databases=["default", "shard"], transaction=True, reset_sequences=True
)

DAY = 86400
TRACEBACK = 'Traceback (most recent call last):\n  File "/srv/shop/jobs.py", line 7, in charge\n'


@pytest.fixture(autouse=True)
def shards() -> Iterator[None]:
    with override_settings(LEASEJOBS_QUEUE_DATABASES={"reports": "shard"}):
        yield


def run(*argv: str) -> str:
    out = io.StringIO()
    call_command(*argv, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def twins(make: Callable[[str], Any]) -> tuple[Any, Any]:
    """``make("default")`` at home and ``make("reports")`` in the shard, with the same id."""
    home, away = make("default"), make("reports")
    assert (home._state.db, away._state.db) == ("default", "shard")
    assert home.pk == away.pk, "the ids must meet for the test to mean anything"
    return home, away


def status(alias: str, pk: int) -> str:
    return str(Job.objects.using(alias).get(pk=pk).status)


def pending(queue: str) -> Job:
    return jobs.noop.enqueue(queue=queue, delay=60)


def buried(queue: str) -> DeadLetter:
    """A dead job of ``queue`` with its letter, in the queue's database."""
    job = jobs.add.enqueue(1, 2, queue=queue, max_attempts=1)
    alias = job._state.db
    with using_database(alias):
        Job.objects.using(alias).filter(pk=job.pk).update(run_at=shifted(-1))
        (claimed,) = protocol.claim("shard-test", batch=1, queues=[queue])
        protocol.fail(claimed.pk, claimed.attempt, Failure("ValueError: order", TRACEBACK))
    return DeadLetter.objects.using(alias).get(job_id=job.pk)


def finished_long_ago(queue: str) -> Job:
    job = jobs.noop.enqueue(queue=queue)
    Job.objects.using(job._state.db).filter(pk=job.pk).update(
        status=Status.SUCCEEDED, finished_at=shifted(-8 * DAY)
    )
    return job


@pytest.mark.parametrize(
    "argv",
    [
        ("canceljob", "1"),
        ("joblogs", "1"),
        ("deadletters", "groups"),
        ("deadletters", "fingerprint"),
        ("workflows", "list"),
        ("workflows", "cancel", "1"),
        ("bulkjobs", "cancel", "--dry-run"),
        ("prunejobs", "--succeeded-older-than", "7d"),
    ],
)
def test_a_database_that_is_not_a_queue_database_is_refused(argv: tuple[str, ...]) -> None:
    job = pending("reports")
    with pytest.raises(CommandError) as caught:
        run(*argv, "--database", "nowhere")
    said = str(caught.value)
    assert "--database 'nowhere' is not a queue database" in said
    assert "the queue databases are 'default', 'shard'" in said
    assert status("shard", job.pk) == Status.PENDING


def test_canceljob_cancels_in_the_database_named_and_at_home_by_default() -> None:
    home, away = twins(pending)
    assert f"job {away.pk}: cancelled" in run("canceljob", str(away.pk), "--database", "shard")
    assert (status("shard", away.pk), status("default", home.pk)) == ("cancelled", "pending")
    run("canceljob", str(home.pk))
    assert status("default", home.pk) == Status.CANCELLED


def test_joblogs_reads_the_logs_of_the_job_in_the_database_named() -> None:
    home, away = twins(pending)
    for job, said in ((home, "from home"), (away, "from the shard")):
        record = {"level": "INFO", "logger": "shop", "message": said, "at": "2025-01-01T00:00Z"}
        JobLog.objects.using(job._state.db).create(job_id=job.pk, attempt=1, records=[record])
    shown = run("joblogs", str(away.pk), "--database", "shard")
    assert "from the shard" in shown
    assert "from home" not in shown
    assert "from home" in run("joblogs", str(home.pk))
    with pytest.raises(CommandError, match="There is no job #2"):
        run("joblogs", "2", "--database", "shard")


def test_deadletters_lists_replays_and_discards_in_the_database_named() -> None:
    home, away = twins(buried)
    assert home.fingerprint == away.fingerprint
    groups = json.loads(run("deadletters", "groups", "--json", "--database", "shard"))
    assert [(g["fingerprint"], g["dead_letters"]) for g in groups] == [(away.fingerprint, 1)]
    replayed = run("deadletters", "replay", "--group", away.fingerprint, "--database", "shard")
    assert "Replayed 1 dead letters" in replayed
    assert DeadLetter.objects.using("shard").get(pk=away.pk).replayed_job_id is not None
    assert DeadLetter.objects.using("default").get(pk=home.pk).replayed_job_id is None
    assert Job.objects.using("default").count() == 1  # no replay written at home
    argv = ("deadletters", "discard", "--group", home.fingerprint, "--yes")
    assert "Discarded 1 dead letters" in run(*argv)
    assert not DeadLetter.objects.using("default").exists()
    assert DeadLetter.objects.using("shard").filter(pk=away.pk).exists()


def test_workflows_lists_shows_and_cancels_in_the_database_named() -> None:
    def flow(queue: str) -> WorkflowRun:
        built = Workflow(name=f"nightly-{queue}")
        built.add(jobs.noop.using(queue=queue, delay=60).si())
        return built.enqueue()

    home, away = twins(flow)
    listed = json.loads(run("workflows", "list", "--json", "--database", "shard"))
    assert [(r["id"], r["name"]) for r in listed] == [(away.pk, "nightly-reports")]
    shown = run("workflows", "show", str(away.pk), "--database", "shard")
    assert shown.startswith(f"workflow run {away.pk} nightly-reports:")
    assert "cancel" in run("workflows", "cancel", str(away.pk), "--database", "shard")
    assert WorkflowRun.objects.using("shard").get(pk=away.pk).status == RunStatus.CANCELLED
    assert WorkflowRun.objects.using("default").get(pk=home.pk).status == RunStatus.RUNNING
    assert "nightly-default" in run("workflows", "show", str(home.pk))


def test_bulkjobs_acts_on_the_database_named_and_logs_which() -> None:
    User.objects.create_user("ops")
    home, away = twins(pending)
    argv = ("bulkjobs", "cancel", "--status", "pending", "--database", "shard")
    assert "Would cancel 1 job(s)" in run(*argv, "--dry-run")
    assert "1 matched" in run(*argv, "--yes", "--by", "ops")
    assert (status("shard", away.pk), status("default", home.pk)) == ("cancelled", "pending")
    [entry] = LogEntry.objects.all()
    assert "in database shard" in entry.change_message


def test_prunejobs_prunes_every_queue_database_saying_how_many_in_each() -> None:
    twins(finished_long_ago)
    finished_long_ago("reports")
    said = run("prunejobs", "--succeeded-older-than", "7d")
    home, _, away = said.partition("Database shard:\n")
    assert home.startswith("Database default:\n")
    assert "succeeded: deleted 1 jobs" in home
    assert "succeeded: deleted 2 jobs" in away
    assert not Job.objects.using("default").exists()
    assert not Job.objects.using("shard").exists()


def test_prunejobs_database_prunes_that_one_only() -> None:
    home, _ = twins(finished_long_ago)
    said = run("prunejobs", "--succeeded-older-than", "7d", "--database", "shard")
    assert "Database" not in said
    assert "succeeded: deleted 1 jobs" in said
    assert not Job.objects.using("shard").exists()
    assert Job.objects.using("default").filter(pk=home.pk).exists()


def test_a_shard_s_worker_prunes_its_own_database_by_retention() -> None:
    home, _ = twins(finished_long_ago)
    fresh = jobs.noop.enqueue(queue="reports")
    with override_settings(LEASEJOBS_RETENTION={"succeeded": "7d"}):
        summary = Worker(database="shard", concurrency=1, poll=0.05, scheduler=False).run(
            burst=True
        )
    assert summary.succeeded == 1
    assert list(Job.objects.using("shard").values_list("pk", flat=True)) == [fresh.pk]
    assert list(Job.objects.using("default").values_list("pk", flat=True)) == [home.pk]
