"""jobstats, checkjobs and prunejobs: output, exit status, and every bad option refused."""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test import override_settings
from testapp import jobs

from django_leasejobs import protocol, upkeep
from django_leasejobs.management.commands.jobstats import Command as JobStatsCommand
from django_leasejobs.models import DeadLetter, Effect, Job, Schedule, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import execution
from django_leasejobs.upkeep import pruning as prune

from ...conftest import shifted

pytestmark = pytest.mark.django_db

DAY = 86400


def run(*args: Any, **options: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def check(*args: str) -> tuple[int, str]:
    """Run checkjobs; return (exit status, output)."""
    out = io.StringIO()
    try:
        call_command("checkjobs", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def drain(queue: str | None = None) -> int:
    """Do what a worker does, in-process: claim due jobs and run them until none is left."""
    done = 0
    while claimed := protocol.claim("drainer", queues=[queue] if queue else None, batch=10):
        for job in claimed:
            execution.run(job, "drainer")
            done += 1
    return done


# --------------------------------------------------------------------------- jobstats


class TestJobStats:
    def test_table_has_a_row_per_queue_and_a_total(self, make_due) -> None:
        make_due(jobs.noop.enqueue(), seconds_ago=125)
        make_due(jobs.other_queue.enqueue(), seconds_ago=10)
        jobs.noop.enqueue(delay=3600)
        lines = run("jobstats").splitlines()
        assert lines[0].startswith("Jobs at ")
        assert lines[1].split() == [
            "queue",
            "pending",
            "due",
            "running",
            "failed",
            "expired",
            "dead",
            "1h",
            "dead",
            "24h",
            "oldest",
            "due",
            "paused",
        ]
        end = lines.index("")  # then the workers, of which there is none
        assert lines[end:] == ["", "workers: none seen"]
        rows = {line.split()[0]: line.split()[1:] for line in lines[2:end]}
        assert set(rows) == {"default", "other", "TOTAL"}
        assert rows["default"][:2] == ["2", "1"]
        assert rows["default"][-2].startswith("2m0")
        assert rows["default"][-1] == "-"
        assert rows["other"][:2] == ["1", "1"]
        assert rows["TOTAL"][:2] == ["3", "2"]

    def test_json_is_the_stats_dict(self, make_due) -> None:
        make_due(jobs.noop.enqueue(), seconds_ago=30)
        data = json.loads(run("jobstats", "--json"))
        assert data["total"]["due"] == 1
        assert 30 <= data["queues"]["default"]["oldest_due_age"] < 90

    def test_watch_refreshes_until_interrupted(self) -> None:
        jobs.noop.enqueue()
        naps: list[float] = []

        def sleep(seconds: float) -> None:
            naps.append(seconds)
            if len(naps) == 3:
                raise KeyboardInterrupt

        command = JobStatsCommand()
        command.sleep = sleep  # type: ignore[method-assign]
        output = run(command, "--json", "--watch", "2.5")
        snapshots = [json.loads(line) for line in output.splitlines()]
        assert len(snapshots) == 3
        assert all(s["total"]["pending"] == 1 for s in snapshots)
        assert naps == [2.5, 2.5, 2.5]

    @pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan"])
    def test_a_bad_watch_interval_is_refused(self, value: str) -> None:
        with pytest.raises(CommandError, match="--watch"):
            run("jobstats", f"--watch={value}")


# --------------------------------------------------------------------------- checkjobs


class TestCheckJobs:
    @override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
    def test_a_stalled_queue_fails_naming_the_queue_and_the_age_then_passes_once_drained(
        self, make_due
    ) -> None:
        stalled = [jobs.noop.enqueue(queue="mail") for _ in range(3)]
        make_due(*stalled, seconds_ago=3600)
        make_due(jobs.noop.enqueue(), seconds_ago=5)

        status, output = check("--max-due-age", "60")
        assert status == 1
        assert "UNHEALTHY queue 'mail': the oldest due job has waited 3600 s" in output
        assert "'default'" not in output
        assert output.count("UNHEALTHY") == 1

        assert drain() == 4
        status, output = check("--max-due-age", "60")
        assert status == 0
        assert output.startswith("OK: every queue within limits (oldest due age 0 s")
        assert check("--max-due-age", "60", "--queue", "mail")[1].startswith(
            "OK: queue(s) mail within limits"
        )

    @override_settings(LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
    def test_durations_are_accepted_for_the_age(self, make_due) -> None:
        make_due(jobs.noop.enqueue(), seconds_ago=600)
        assert check("--max-due-age", "15m")[0] == 0
        assert check("--max-due-age", "5m")[0] == 1

    def test_expired_leases_fail(self, expire_lease) -> None:
        jobs.noop.enqueue(queue="busy")
        (claimed,) = protocol.claim("w1", batch=1)
        assert check("--max-expired-leases", "0")[0] == 0
        expire_lease(claimed, seconds_ago=30)
        status, output = check("--max-expired-leases", "0")
        assert status == 1
        assert "queue 'busy': 1 running job(s) with an expired lease, more than 0" in output

    def test_dead_letters_in_the_last_hour_fail(self) -> None:
        for _ in range(2):
            jobs.permanent.enqueue()
        assert drain() == 2
        assert DeadLetter.objects.count() == 2
        assert check("--max-dead-per-hour", "2")[0] == 0
        status, output = check("--max-dead-per-hour", "1")
        assert status == 1
        assert "queue 'default': 2 job(s) went dead in the last hour, more than 1" in output
        DeadLetter.objects.update(created_at=shifted(-2 * 3600))
        assert check("--max-dead-per-hour", "1")[0] == 0

    def test_queue_limits_the_check(self, make_due) -> None:
        make_due(jobs.noop.enqueue(queue="mail"), seconds_ago=3600)
        assert check("--max-due-age", "60", "--queue", "default")[0] == 0
        assert check("--max-due-age", "60", "--queue", "default,mail")[0] == 1
        assert check("--max-due-age", "60", "--queue", "default", "--queue", "mail")[0] == 1

    @override_settings(LEASEJOBS_HEALTH_MAX_DUE_AGE=60, LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None)
    def test_thresholds_default_to_the_settings_and_options_override_them(self, make_due) -> None:
        make_due(jobs.noop.enqueue(), seconds_ago=120)
        assert check()[0] == 1
        assert check("--max-due-age", "300")[0] == 0

    def test_quiet_when_healthy_at_verbosity_0(self) -> None:
        assert check("--max-due-age", "60", "-v", "0") == (0, "")

    @override_settings(
        LEASEJOBS_HEALTH_MAX_UNSERVED_AGE=None
    )  # on by default: a plain checkjobs checks that
    def test_nothing_to_check_is_a_usage_error(self) -> None:
        with pytest.raises(CommandError, match="Nothing to check") as info:
            run("checkjobs")
        assert info.value.returncode == 2

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--max-due-age", "soon"], "'soon' is not a duration"),
            (["--max-due-age", "-5"], "zero or more"),
            (["--max-dead-per-hour", "1.5"], "'1.5' is not a whole number"),
            (["--max-dead-per-hour", "-1"], "must be 0 or more"),
            (["--max-expired-leases", "many"], "'many' is not a whole number"),
            (["--max-due-age", "60", "--queue", "no spaces"], "not a valid queue name"),
            (["--max-due-age", "60", "--queue", "a,,b"], "not a valid queue name"),
        ],
    )
    def test_bad_options_are_refused(self, args: list[str], message: str) -> None:
        with pytest.raises(CommandError, match=message):
            run("checkjobs", *args)

    @override_settings(LEASEJOBS_QUEUES=["default", "mail"])
    def test_a_queue_outside_the_declared_list_is_refused(self) -> None:
        with pytest.raises(CommandError, match=r"Unknown queue\(s\) mial") as info:
            run("checkjobs", "--max-due-age", "60", "--queue", "mial")
        assert info.value.returncode == 2

    def test_keyword_options_are_checked_too(self) -> None:
        with pytest.raises(CommandError, match="--max-due-age must be 0 or more"):
            run("checkjobs", max_due_age=-1)
        with pytest.raises(CommandError, match="--max-dead-per-hour: 'x' is not a whole"):
            run("checkjobs", max_dead_per_hour="x")


# --------------------------------------------------------------------------- prunejobs


def finish(count: int, days_ago: float, queue: str = "default") -> list[int]:
    """Create ``count`` succeeded jobs that finished ``days_ago`` days ago."""
    created = [jobs.noop.enqueue(queue=queue) for _ in range(count)]
    assert drain(queue) == count
    ids = [job.pk for job in created]
    Job.objects.filter(pk__in=ids).update(finished_at=shifted(-days_ago * DAY))
    return ids


def kill(days_ago: float) -> Job:
    """Create a dead job (with its dead letter) that died ``days_ago`` days ago."""
    job = jobs.permanent.enqueue(queue="poison")
    assert drain("poison") == 1
    Job.objects.filter(pk=job.pk).update(finished_at=shifted(-days_ago * DAY))
    DeadLetter.objects.filter(job=job).update(created_at=shifted(-days_ago * DAY))
    return job


@pytest.fixture(params=["direct", "collector"])
def delete_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways pruning deletes: direct SQL, and the ORM collector used when another app's
    model points at Job (forced here by pretending the known relations are different)."""
    if request.param == "collector":
        monkeypatch.setattr(prune, "_KNOWN_RELATIONS", set())
    return str(request.param)


class TestPruneJobs:
    def test_prunes_old_finished_jobs_only_and_keeps_live_jobs_schedules_and_effects(
        self, delete_path: str
    ) -> None:
        old_succeeded = finish(5, days_ago=8)
        recent_succeeded = finish(1, days_ago=6)
        old_dead, recent_dead = kill(days_ago=31), kill(days_ago=10)
        cancelled = jobs.noop.enqueue()
        assert protocol.cancel(cancelled.pk)
        # Live jobs, made to look ancient: only their status protects them.
        pending = jobs.noop.enqueue(delay=3600)
        failed = jobs.always_fails.enqueue()
        (first_try,) = protocol.claim("w1", batch=1)
        assert execution.run(first_try, "w1") is Outcome.RETRIED
        running = jobs.noop.enqueue(queue="busy")
        protocol.claim("w1", queues=["busy"], batch=1)
        live = [pending.pk, failed.pk, running.pk, cancelled.pk]
        Job.objects.filter(pk__in=live).update(
            finished_at=shifted(-100 * DAY), created_at=shifted(-100 * DAY)
        )
        # A cron occurrence's job, and an effect recorded by an old job.
        cursor = dt.datetime(2026, 1, 1, 3, tzinfo=dt.timezone.utc)
        schedule = Schedule.objects.create(
            name="nightly", cron="0 3 * * *", job=jobs.noop.name, last_occurrence_at=cursor
        )
        Job.objects.filter(pk=old_succeeded[0]).update(schedule=schedule, occurrence_at=cursor)
        Effect.objects.create(key="invoice-sent:1", job_id=old_succeeded[1])

        output = run(
            "prunejobs", "--succeeded-older-than", "7d", "--dead-older-than", "30d", "--batch", "2"
        )

        assert "succeeded: deleted 5 jobs finished over 7d00h ago in 3 batch(es)" in output
        assert "dead: deleted 1 jobs finished over 30d00h ago in 1 batch(es)" in output
        remaining = set(Job.objects.values_list("pk", flat=True))
        assert remaining.isdisjoint(old_succeeded)
        assert old_dead.pk not in remaining
        assert remaining >= {*recent_succeeded, recent_dead.pk, *live}
        assert Job.objects.get(pk=pending.pk).status == Status.PENDING
        assert Job.objects.get(pk=failed.pk).status == Status.FAILED
        assert Job.objects.get(pk=running.pk).status == Status.RUNNING
        assert Job.objects.get(pk=cancelled.pk).status == Status.CANCELLED  # no age given
        assert list(DeadLetter.objects.values_list("job_id", flat=True)) == [recent_dead.pk]
        schedule.refresh_from_db()
        assert schedule.last_occurrence_at == cursor
        effect = Effect.objects.get(key="invoice-sent:1")
        assert effect.job_id is None

    def test_the_direct_path_knows_every_relation_to_job(self) -> None:
        # If this fails, a model now points at Job: pruning still works (through the collector)
        # but slower; teach _delete_jobs what to do with the new relation.
        relations = {(r.related_model.__name__, r.field.name) for r in Job._meta.related_objects}
        assert relations == prune._KNOWN_RELATIONS

    def test_cancelled_jobs_have_their_own_age(self) -> None:
        cancelled = jobs.noop.enqueue()
        assert protocol.cancel(cancelled.pk)
        Job.objects.filter(pk=cancelled.pk).update(finished_at=shifted(-2 * DAY))
        assert "cancelled: deleted 0 jobs" in run("prunejobs", "--cancelled-older-than", "3d")
        assert "cancelled: deleted 1 jobs" in run("prunejobs", "--cancelled-older-than", "1d")
        assert not Job.objects.exists()

    def test_a_replayed_job_is_kept_while_its_dead_letter_exists(self, delete_path: str) -> None:
        dead = kill(days_ago=10)
        replayed = protocol.replay(dead.dead_letter.pk)
        assert drain("poison") == 1  # the replay dies again: a new dead letter of its own
        Job.objects.filter(pk=replayed.pk).update(finished_at=shifted(-40 * DAY))
        DeadLetter.objects.filter(job=replayed).update(created_at=shifted(-40 * DAY))
        run("prunejobs", "--dead-older-than", "30d")
        # Deleting the replay would clear dead.dead_letter.replayed_job: a second replay.
        assert Job.objects.filter(pk=replayed.pk).exists()
        dead_letter = DeadLetter.objects.get(job=dead)
        assert dead_letter.replayed_job_id == replayed.pk
        assert protocol.replay(dead_letter.pk).pk == replayed.pk
        # Once the original dead letter goes, so can the replay.
        run("prunejobs", "--dead-older-than", "5d")
        assert not Job.objects.exists()
        assert not DeadLetter.objects.exists()

    def test_prune_finished_walks_batches_in_primary_key_order(self) -> None:
        ids = finish(5, days_ago=8)
        age = dt.timedelta(days=7)
        seen, after = [], 0
        while True:
            before = set(Job.objects.values_list("pk", flat=True))
            deleted, last = upkeep.prune_finished(Status.SUCCEEDED, age, batch=2, after_id=after)
            if last == after:
                assert deleted == 0
                break
            gone = sorted(before - set(Job.objects.values_list("pk", flat=True)))
            assert len(gone) == deleted <= 2
            assert gone[-1] == last
            seen += gone
            after = last
        assert seen == sorted(ids)

    def test_live_states_cannot_be_pruned(self) -> None:
        for status in (Status.PENDING, Status.RUNNING, Status.FAILED):
            with pytest.raises(ValueError, match="Only finished jobs are pruned"):
                upkeep.prune_finished(status, dt.timedelta(days=1))
        with pytest.raises(ValueError, match="batch must be a positive integer"):
            upkeep.prune_finished(Status.SUCCEEDED, dt.timedelta(days=1), batch=0)

    def test_dry_run_counts_and_deletes_nothing(self) -> None:
        finish(3, days_ago=8)
        kill(days_ago=31)
        output = run(
            "prunejobs", "--succeeded-older-than", "7d", "--dead-older-than", "30d", "--dry-run"
        )
        assert "succeeded: would delete 3 jobs" in output
        assert "dead: would delete 1 jobs" in output
        assert Job.objects.count() == 4
        assert DeadLetter.objects.count() == 1

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            ([], "Nothing to prune"),
            (["--succeeded-older-than", "7"], "'7' has no unit"),
            (["--dead-older-than", "a month"], "'a month' is not a duration"),
            (["--succeeded-older-than=-7d"], "zero or more"),
            (["--cancelled-older-than", ""], "An empty duration"),
            (["--succeeded-older-than", "7d", "--batch", "0"], "between 1 and 10000"),
            (["--succeeded-older-than", "7d", "--batch", "10001"], "between 1 and 10000"),
            (["--succeeded-older-than", "7d", "--batch", "lots"], "'lots' is not a whole"),
        ],
    )
    def test_bad_options_are_refused(self, args: list[str], message: str) -> None:
        finish(1, days_ago=8)
        with pytest.raises(CommandError, match=message):
            run("prunejobs", *args)
        assert Job.objects.count() == 1

    def test_keyword_options_are_checked_too(self) -> None:
        with pytest.raises(CommandError, match="--succeeded-older-than: 'soon' is not"):
            run("prunejobs", succeeded_older_than="soon")
        with pytest.raises(CommandError, match="--batch must be between"):
            run("prunejobs", succeeded_older_than="7d", batch=0)


class Unreadable(Exception):
    """Raised to roll the renamed table back."""


def test_checkjobs_reports_a_database_error_as_unhealthy(vendor: str) -> None:
    if vendor == "mysql":
        pytest.skip("MySQL commits DDL at once: renaming the table would outlive the test")
    with pytest.raises(Unreadable), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE django_leasejobs_job RENAME TO leasejobs_gone")
        status, output = check("--max-due-age", "60")
        raise Unreadable
    assert status == 1
    assert output.startswith("UNHEALTHY: cannot read the jobs table:")


@override_settings(LEASEJOBS_READ_DATABASES={"default": "default"})
def test_jobstats_says_which_replica_it_read() -> None:
    # The suite's one database as its own replica; a project with a replica alias of its own
    # is tests/acceptance/test_read_replicas.py.
    said = "Read from the replica default (not a standby: its rows are current)."
    assert said in run("jobstats")
    assert json.loads(run("jobstats", "--json"))["read_from"]["database"] == "default"


def test_jobstats_without_a_replica_says_nothing_of_one() -> None:
    assert "replica" not in run("jobstats")
    assert "read_from" not in json.loads(run("jobstats", "--json"))
