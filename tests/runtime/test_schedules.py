"""The scheduler tick: one job per (schedule, occurrence), misfire policies, jitter, pruning.

Time moves by moving schedule cursors back in the database (``shifted``), never by sleeping; "now"
is always the database's. Schedules use ``every_ten_minutes()``: a cron expression whose latest
occurrence was 5 to 6 minutes ago, so no assertion depends on where in the minute a test runs.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections import Counter
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from django_leasejobs import protocol, upkeep
from django_leasejobs.core import job_modules
from django_leasejobs.core.occurrences import occurrences_between
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Schedule, ScheduleSkip
from django_leasejobs.runtime import schedules

from ..conftest import race, shifted

pytestmark = pytest.mark.django_db

MINUTE = 60
_names = itertools.count()


def every_ten_minutes() -> str:
    """Fires every 10 minutes (UTC); the latest occurrence was 5 to 6 minutes ago."""
    return f"{(db_now().minute - 5) % 10}-59/10 * * * *"


def make(cron: str | None = None, *, cursor_ago: float | None = None, **fields: Any) -> Schedule:
    """A schedule in the database; ``cursor_ago`` puts its cursor that many seconds back."""
    fields.setdefault("job", "testapp.jobs.noop")
    fields.setdefault("name", f"schedule-{next(_names)}")
    schedule = Schedule.objects.create(cron=cron or every_ten_minutes(), **fields)
    if cursor_ago is not None:
        Schedule.objects.filter(pk=schedule.pk).update(last_occurrence_at=shifted(-cursor_ago))
    schedule.refresh_from_db()
    return schedule


def occurrences(schedule: Schedule) -> list[dt.datetime]:
    return sorted(Job.objects.filter(schedule=schedule).values_list("occurrence_at", flat=True))


def accounted(
    schedule: Schedule, since: dt.datetime
) -> tuple[list[dt.datetime], list[dt.datetime]]:
    """Every occurrence from ``since`` to the cursor is one job or one skip, never both or neither.

    Returns (emitted, skipped).
    """
    schedule.refresh_from_db()
    expected = occurrences_between(schedule, since, schedule.last_occurrence_at)
    skips = list(ScheduleSkip.objects.filter(schedule=schedule))
    skipped = [t for t in expected if sum(s.after < t <= s.through for s in skips) == 1]
    assert all(sum(s.after < t <= s.through for s in skips) <= 1 for t in expected)
    emitted = occurrences(schedule)
    assert emitted == [t for t in expected if t not in skipped]
    assert Counter(emitted).most_common(1)[0][1] == 1 if emitted else True
    return emitted, skipped


class TestEmission:
    def test_a_due_occurrence_becomes_one_job_with_the_schedules_settings(self) -> None:
        schedule = make(
            cursor_ago=8 * MINUTE,
            job="testapp.jobs.add",
            args=[2, 3],
            kwargs={},
            queue="reports",
            priority=7,
            max_attempts=2,
        )
        before = db_now()
        assert schedules.tick() == 1
        (job,) = Job.objects.filter(schedule=schedule)
        (due,) = occurrences_between(schedule, before - dt.timedelta(minutes=8), before)
        assert (job.name, job.args, job.queue, job.priority, job.max_attempts) == (
            "testapp.jobs.add",
            [2, 3],
            "reports",
            7,
            2,
        )
        assert job.status == "pending"
        assert job.occurrence_at == due == job.run_at
        assert 5 * MINUTE <= (before - due).total_seconds() < 6 * MINUTE
        schedule.refresh_from_db()
        assert schedule.last_occurrence_at == due

    def test_unset_fields_come_from_the_job_defaults(self) -> None:
        make(cursor_ago=8 * MINUTE, job="testapp.jobs.other_queue")
        assert schedules.tick() == 1
        job = Job.objects.get()
        assert (job.queue, job.priority, job.max_attempts) == ("other", 5, 5)

    def test_a_job_of_a_module_not_imported_yet_is_found_as_a_worker_finds_it(
        self, settings, late_jobs: str
    ) -> None:
        settings.LEASEJOBS_TASK_MODULES = [late_jobs]
        make(cursor_ago=8 * MINUTE, job=f"{late_jobs}.late_report", args=["monday"])
        assert schedules.tick() == 1
        assert Job.objects.get().name == f"{late_jobs}.late_report"

    def test_an_idle_tick_emits_nothing(self) -> None:
        make(cursor_ago=8 * MINUTE)
        assert schedules.tick() == 1
        assert schedules.tick() == 0
        assert Job.objects.count() == 1

    def test_a_new_schedule_fires_from_its_creation_not_before(self) -> None:
        fresh = make()  # created now: its next occurrence is 4 to 5 minutes away
        older = make()
        Schedule.objects.filter(pk=older.pk).update(created_at=shifted(-12 * MINUTE))
        assert schedules.tick() == 1
        assert Job.objects.get().schedule_id == older.pk
        assert Schedule.objects.get(pk=fresh.pk).last_occurrence_at is None

    def test_an_idle_tick_is_one_query(self, django_assert_num_queries) -> None:
        make(cursor_ago=8 * MINUTE)
        schedules.tick()
        with django_assert_num_queries(1):
            assert schedules.tick() == 0

    def test_disabled_schedules_do_not_tick(self) -> None:
        make(cursor_ago=30 * MINUTE, enabled=False)
        assert schedules.tick() == 0
        assert not Job.objects.exists()

    def test_a_catch_up_is_bounded_by_limit_and_continues_on_the_next_tick(self) -> None:
        schedule = make(cursor_ago=2 * 3600, misfire="all", catchup_window=3 * 3600)
        start = schedule.last_occurrence_at
        assert [schedules.tick(limit=5) for _ in range(4)] == [5, 5, 2, 0]
        emitted, skipped = accounted(schedule, start)
        assert (len(emitted), skipped) == (12, [])

    @pytest.mark.parametrize("limit", [0, -1, 1.5, True, "10"])
    def test_a_bad_limit_is_refused(self, limit: Any) -> None:
        with pytest.raises(ValueError, match="limit must be a positive integer"):
            schedules.tick(limit=limit)


class TestOncePerOccurrence:
    def test_a_failure_after_the_insert_rolls_back_the_cursor_too(self, caplog) -> None:
        """Emit and advance are one transaction: a crash between them leaves neither."""
        schedule = make(cursor_ago=8 * MINUTE)

        def crash(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            result = execute(sql, params, many, context)
            if sql.startswith("INSERT INTO") and Job._meta.db_table in sql:
                raise RuntimeError("scheduler killed after the INSERT")
            return result

        with connection.execute_wrapper(crash):
            assert schedules.tick() == 0
        assert "scheduler killed after the INSERT" in caplog.text
        assert not Job.objects.exists()
        assert (
            Schedule.objects.get(pk=schedule.pk).last_occurrence_at == schedule.last_occurrence_at
        )
        assert schedules.tick() == 1
        accounted(schedule, schedule.last_occurrence_at)

    def test_pruning_old_jobs_never_reopens_their_occurrences(self) -> None:
        schedule = make(cursor_ago=60 * MINUTE, misfire="all")
        start = schedule.last_occurrence_at
        assert schedules.tick() == 6
        Job.objects.filter(schedule=schedule).update(status="succeeded", finished_at=shifted(-10))
        assert upkeep.prune_finished("succeeded", dt.timedelta(seconds=1))[0] == 6
        assert schedules.tick() == 0
        assert not Job.objects.exists()
        schedule.refresh_from_db()
        assert len(occurrences_between(schedule, start, schedule.last_occurrence_at)) == 6

    def test_a_cursor_moved_back_by_hand_never_duplicates_a_job(self, caplog) -> None:
        schedule = make(cursor_ago=60 * MINUTE, misfire="all")
        start = schedule.last_occurrence_at
        assert schedules.tick() == 6
        cursor = Schedule.objects.get(pk=schedule.pk).last_occurrence_at
        Schedule.objects.filter(pk=schedule.pk).update(last_occurrence_at=start)
        assert schedules.tick() == 0
        assert Schedule.objects.get(pk=schedule.pk).last_occurrence_at == cursor
        assert Job.objects.count() == 6
        assert caplog.text.count("schedule.occurrence_exists") == 6
        accounted(schedule, start)

    def test_a_scheduler_with_a_stale_cursor_backs_off(self) -> None:
        schedule = make(cursor_ago=60 * MINUTE, misfire="all")
        stale, also_stale = (
            Schedule.objects.get(pk=schedule.pk),
            Schedule.objects.get(pk=schedule.pk),
        )
        (first, second, *_) = occurrences_between(schedule, schedule.last_occurrence_at, db_now())
        assert protocol.emit_occurrence(schedule, first, first) is not None
        assert protocol.emit_occurrence(stale, first, first) is None
        assert stale.last_occurrence_at == first  # refreshed from the database
        assert protocol.skip_occurrences(also_stale, second, count=2, reason="x") is False
        assert also_stale.last_occurrence_at == first
        assert not ScheduleSkip.objects.exists()
        assert protocol.emit_occurrence(stale, second, second) is not None
        assert occurrences(schedule) == [first, second]

    def test_a_cursor_never_moves_backwards(self) -> None:
        schedule = make(cursor_ago=60 * MINUTE)
        with pytest.raises(ValueError, match="only moves forward"):
            protocol.emit_occurrence(
                schedule, schedule.last_occurrence_at, schedule.last_occurrence_at
            )

    @pytest.mark.django_db(transaction=True)
    def test_concurrent_ticks_emit_each_occurrence_once(self) -> None:
        made = [make(cursor_ago=2 * 3600, misfire="all", catchup_window=3 * 3600) for _ in range(5)]
        starts = {s.pk: s.last_occurrence_at for s in made}

        def ticker() -> int:
            total = 0
            while emitted := schedules.tick(limit=3):
                total += emitted
            return total

        counts = race(*(ticker for _ in range(4)))
        assert sum(counts) == Job.objects.count() == 5 * 12
        for schedule in made:
            emitted, skipped = accounted(schedule, starts[schedule.pk])
            assert (len(emitted), skipped) == (12, [])


class TestMisfire:
    """After a 2-hour outage, 12 occurrences are due: 5, 15, ..., 115 minutes old."""

    OUTAGE = 2 * 3600

    def run(self, **fields: Any) -> tuple[Schedule, list[dt.datetime], list[dt.datetime]]:
        schedule = make(cursor_ago=self.OUTAGE, **fields)
        start = schedule.last_occurrence_at
        schedules.tick()
        assert schedules.tick() == 0  # settled: a second tick changes nothing
        emitted, skipped = accounted(schedule, start)
        assert len(emitted) + len(skipped) == 12
        return schedule, emitted, skipped

    def ages(self, instants: list[dt.datetime]) -> list[int]:
        now = db_now()
        return [int((now - t).total_seconds() // 600) * 10 + 5 for t in instants]

    def test_all_runs_every_missed_occurrence_inside_the_catch_up_window(self) -> None:
        schedule, emitted, skipped = self.run(misfire="all", catchup_window=3600)
        assert self.ages(emitted) == [55, 45, 35, 25, 15, 5]
        assert self.ages(skipped) == [115, 105, 95, 85, 75, 65]
        skip = ScheduleSkip.objects.get(schedule=schedule)
        assert (skip.count, skip.through) == (6, skipped[-1])
        assert "catch-up window" in skip.reason

    def test_all_with_a_wide_window_runs_everything(self) -> None:
        _, emitted, skipped = self.run(misfire="all", catchup_window=3 * 3600)
        assert (len(emitted), skipped) == (12, [])
        assert not ScheduleSkip.objects.exists()

    def test_latest_runs_only_the_newest(self) -> None:
        schedule, emitted, skipped = self.run(misfire="latest", catchup_window=3600)
        assert self.ages(emitted) == [5]
        assert len(skipped) == 11
        skip = ScheduleSkip.objects.get(schedule=schedule)
        assert skip.count == 11
        assert "only the newest" in skip.reason

    def test_latest_skips_everything_when_even_the_newest_is_too_old(self) -> None:
        _, emitted, skipped = self.run(misfire="latest", catchup_window=2 * MINUTE)
        assert (emitted, len(skipped)) == ([], 12)

    def test_skip_runs_nothing_that_was_missed(self) -> None:
        schedule, emitted, skipped = self.run(misfire="skip")
        assert (emitted, len(skipped)) == ([], 12)
        skip = ScheduleSkip.objects.get(schedule=schedule)
        assert skip.count == 12
        assert skip.reason == "misfire=skip: missed by more than 60s"
        assert Schedule.objects.get(pk=schedule.pk).last_occurrence_at == skipped[-1]

    @override_settings(LEASEJOBS_MISFIRE_GRACE_SECONDS=10 * MINUTE)
    def test_skip_still_runs_what_is_inside_the_grace_period(self) -> None:
        _, emitted, skipped = self.run(misfire="skip")
        assert self.ages(emitted) == [5]
        assert len(skipped) == 11

    @override_settings(LEASEJOBS_MISFIRE_GRACE_SECONDS=10 * MINUTE)
    def test_on_time_occurrences_are_never_skipped(self) -> None:
        for policy in ("all", "latest", "skip"):
            make(cursor_ago=8 * MINUTE, misfire=policy)
        assert schedules.tick() == 3
        assert not ScheduleSkip.objects.exists()

    def test_a_huge_outage_is_recorded_without_counting_every_occurrence(self) -> None:
        schedule = make("* * * * *", cursor_ago=30 * 86400, misfire="latest")
        assert schedules.tick() == 1
        skip = ScheduleSkip.objects.get(schedule=schedule)
        assert skip.count is None  # more than COUNT_CAP
        assert (skip.through - skip.after).days == 29


class TestJitter:
    def test_run_at_stays_inside_the_window_and_spreads_a_same_second_spike(self) -> None:
        jitter = 600
        cron = every_ten_minutes()
        Schedule.objects.bulk_create(
            Schedule(name=f"spike-{i}", cron=cron, job="testapp.jobs.noop", jitter=jitter)
            for i in range(1000)
        )
        Schedule.objects.update(last_occurrence_at=shifted(-8 * MINUTE))
        assert schedules.tick(limit=1000) == 1000
        rows = list(Job.objects.values_list("occurrence_at", "run_at"))
        (occurrence_at,) = {occurrence for occurrence, _ in rows}  # the key stays exact
        offsets = [(run_at - occurrence_at).total_seconds() for _, run_at in rows]
        assert all(0 <= offset <= jitter for offset in offsets)
        # Ten one-minute buckets expect 100 jobs each; 50 is more than five deviations below.
        buckets = Counter(min(int(offset // 60), 9) for offset in offsets)
        assert sorted(buckets) == list(range(10))
        assert min(buckets.values()) >= 50, buckets
        assert len(set(offsets)) > 990


class TestBrokenSchedules:
    def test_a_broken_schedule_is_logged_once_and_the_others_keep_ticking(self, caplog) -> None:
        broken = {
            "bad-cron": {"cron": "61 * * * *"},
            "bad-timezone": {"timezone": "Mars/Olympus"},
            "bad-job": {"job": "nowhere.jobs.missing"},
            "bad-args": {"args": "not a list"},
            "bad-misfire": {"misfire": "often"},
        }
        for name, fields in broken.items():
            make(name=name, cursor_ago=8 * MINUTE, **fields)
        good = make(name="good", cursor_ago=8 * MINUTE)
        with caplog.at_level(logging.ERROR, logger="django_leasejobs"):
            assert schedules.tick() == 1
            assert schedules.tick() == 0
        assert [job.schedule_id for job in Job.objects.all()] == [good.pk]
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert sorted(message.split()[1] for message in errors) == sorted(
            f"name={name}" for name in broken
        )
        assert Schedule.objects.filter(last_occurrence_at__gt=shifted(-7 * MINUTE)).get() == good
        joined = "\n".join(errors)
        for fragment in ("out of range", "unknown timezone 'Mars/Olympus'", "nowhere.jobs.missing"):
            assert fragment in joined
        assert "args must be a list" in joined
        assert job_modules.JOB_ADVICE in joined  # what to do about the unknown job
        assert "unknown misfire policy 'often'" in joined

    def test_a_fixed_schedule_resumes(self, caplog) -> None:
        schedule = make(name="fixable", cursor_ago=8 * MINUTE, job="nowhere.jobs.missing")
        assert schedules.tick() == 0
        Schedule.objects.filter(pk=schedule.pk).update(job="testapp.jobs.noop")
        assert schedules.tick() == 1


def test_an_emitted_job_is_announced_like_an_enqueued_one(
    django_capture_on_commit_callbacks,
) -> None:
    from django_leasejobs.db import signals

    seen: list[Job] = []

    def receiver(sender: Any, job: Job, **kwargs: Any) -> None:
        seen.append(job)

    signals.job_enqueued.connect(receiver)
    try:
        make(cursor_ago=8 * MINUTE)
        with django_capture_on_commit_callbacks(execute=True):
            assert schedules.tick() == 1
    finally:
        signals.job_enqueued.disconnect(receiver)
    assert [job.pk for job in seen] == [Job.objects.get().pk]
    assert seen[0].occurrence_at is not None
