"""``@job(cron=...)``: schedules declared in code, validated at decoration, synced as
``LEASEJOBS_SCHEDULES`` entries are, and left alone by a process that does not register them.

Each test registers its jobs in a copy of the registry (``declare``), so no other test's sync
meets them. Time is moved in the database (the schedule's ``created_at``), never waited for.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now, Trunc
from django.test import override_settings

from django_leasejobs import job, protocol
from django_leasejobs.checks import schedules as schedule_checks
from django_leasejobs.core import registry
from django_leasejobs.core.code_schedules import MISFIRE_POLICIES
from django_leasejobs.errors import ScheduleError
from django_leasejobs.models import Job, Misfire, Schedule, Status
from django_leasejobs.runtime import execution, schedules
from django_leasejobs.upkeep import schedule_sync

from ..conftest import shifted

pytestmark = pytest.mark.django_db

CALLS: list[str] = []
NAME = f"{__name__}.nightly"


def nightly(note: str = "") -> None:
    CALLS.append(note or "nightly")


def hourly(*args: Any, **kwargs: Any) -> None:
    CALLS.append("hourly")


def needs_arguments(user_id: int, full: bool = False) -> None:
    """Occurrences call with no arguments: this one cannot be scheduled in code."""


Declare = Callable[..., Any]


@pytest.fixture
def declare(monkeypatch: pytest.MonkeyPatch) -> Declare:
    """Register ``func`` as ``@job(**options)`` in a copy of the registry, for this test only."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))
    CALLS.clear()

    def register(func: Callable[..., Any], **options: Any) -> Any:
        return job(**options)(func)

    return register


def sync(specs: dict[str, Any] | None = None) -> schedule_sync.SyncResult:
    with override_settings(LEASEJOBS_SCHEDULES=specs or {}):
        return schedule_sync.sync_from_settings()


def forget(name: str) -> None:
    """As a process of an older release: the job is not registered at all."""
    registry._registry.pop(name)


def drain() -> int:
    done = 0
    while claimed := protocol.claim("drainer", batch=10):
        for claimed_job in claimed:
            execution.run(claimed_job, "drainer")
            done += 1
    return done


# --------------------------------------------------------------------------- decoration


BAD_OPTIONS = [
    ({"cron": "61 * * * *"}, "invalid cron expression '61 * * * *'"),
    ({"cron": "* * * * * *"}, "6 fields; a cron expression has exactly five"),
    ({"cron": "0 0 30 2 *"}, "never matches a date"),
    ({"cron": ""}, "the cron expression is empty"),
    ({"cron": 5}, "a cron expression is a string, not int"),
    ({"cron": "@daily", "timezone": "Mars/Olympus"}, "unknown timezone 'Mars/Olympus'"),
    ({"cron": "@daily", "timezone": ""}, "a timezone is an IANA name"),
    ({"cron": "@daily", "misfire": "often"}, "misfire must be one of all, latest, skip"),
    ({"cron": "@daily", "jitter": -5}, "jitter must be a whole number of seconds, 0 or more"),
    ({"cron": "@daily", "jitter": 1.5}, "jitter must be a whole number of seconds"),
    ({"cron": "@daily", "jitter": True}, "jitter must be a whole number of seconds"),
    ({"cron": "@daily", "jitter": "60"}, "jitter must be a whole number of seconds"),
    ({"timezone": "Europe/Paris"}, "timezone only apply to a schedule; give cron= too"),
    ({"misfire": "all", "jitter": 5}, "misfire, jitter only apply to a schedule"),
]


class TestDecoration:
    @pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
    def test_bad_options_fail_at_decoration_naming_the_job(
        self, declare: Declare, options: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(ScheduleError) as caught:
            declare(nightly, **options)
        assert message in str(caught.value)
        assert repr(NAME) in str(caught.value)
        assert registry.lookup(NAME) is None  # nothing half-registered

    def test_every_problem_is_listed_at_once(self, declare: Declare) -> None:
        with pytest.raises(ScheduleError) as caught:
            declare(nightly, cron="61 * * * *", timezone="Nowhere", misfire="x", jitter=-1)
        for part in ("invalid cron", "unknown timezone", "misfire must", "jitter must"):
            assert part in str(caught.value)

    def test_a_job_that_needs_arguments_cannot_be_scheduled_in_code(self, declare: Declare) -> None:
        with pytest.raises(ScheduleError, match="it requires user_id \\(give them defaults"):
            declare(needs_arguments, cron="@daily")

    def test_defaults_and_given_values(self, declare: Declare) -> None:
        plain = declare(nightly, cron="0  3 * * *")
        assert plain.schedule.cron == "0 3 * * *"
        assert (plain.schedule.timezone, plain.schedule.misfire, plain.schedule.jitter) == (
            "UTC",
            "latest",
            0,
        )
        full = declare(hourly, cron="@hourly", timezone="Europe/Paris", misfire="all", jitter=60)
        assert full.schedule.fields(full.name) == {
            "job": full.name,
            "cron": "@hourly",
            "timezone": "Europe/Paris",
            "args": [],
            "kwargs": {},
            "queue": "",
            "priority": None,
            "max_attempts": None,
            "jitter": 60,
            "misfire": "all",
            "enabled": True,
            "catchup_window": 3600,
        }

    def test_a_job_without_cron_declares_nothing(self, declare: Declare) -> None:
        assert declare(nightly).schedule is None

    def test_the_misfire_policies_are_the_models(self) -> None:
        assert tuple(Misfire.values) == MISFIRE_POLICIES

    def test_a_declaration_meets_the_rules_of_a_settings_entry(self, declare: Declare) -> None:
        spec = declare(nightly, cron="0 3 * * *", timezone="Europe/Paris", jitter=60)
        fields = spec.schedule.fields(spec.name)
        settings_entry = {k: v for k, v in fields.items() if k != "queue"}
        assert schedule_sync.validate_schedule_spec(spec.name, settings_entry) == fields


# --------------------------------------------------------------------------- sync


class TestSync:
    def test_a_declaration_becomes_a_schedule_named_after_the_job(self, declare: Declare) -> None:
        declare(nightly, cron="0 3 * * *", timezone="Europe/Paris", misfire="skip", jitter=60)
        assert sync().created == [NAME]
        row = Schedule.objects.get()
        assert (row.name, row.job, row.cron, row.timezone) == (
            NAME,
            NAME,
            "0 3 * * *",
            "Europe/Paris",
        )
        assert (row.misfire, row.jitter, row.enabled) == ("skip", 60, True)
        assert row.from_code
        assert not row.from_settings
        assert sync().unchanged == [NAME]

    def test_a_changed_declaration_updates_and_keeps_the_cursor(self, declare: Declare) -> None:
        declare(nightly, cron="0 3 * * *")
        sync()
        cursor = dt.datetime(2026, 1, 1, 3, tzinfo=dt.timezone.utc)
        Schedule.objects.update(last_occurrence_at=cursor)
        declare(nightly, cron="0 4 * * *")
        assert sync().updated == [NAME]
        row = Schedule.objects.get()
        assert row.cron == "0 4 * * *"
        assert row.last_occurrence_at == cursor

    def test_an_admin_edit_stays_until_the_declaration_changes(self, declare: Declare) -> None:
        declare(nightly, cron="0 3 * * *")
        sync()
        Schedule.objects.update(enabled=False, cron="0 5 * * *")
        assert sync().unchanged == [NAME]
        assert Schedule.objects.values_list("enabled", "cron").get() == (False, "0 5 * * *")
        declare(nightly, cron="0 6 * * *")
        assert sync().updated == [NAME]
        assert Schedule.objects.values_list("enabled", "cron").get() == (True, "0 6 * * *")

    def test_a_process_that_does_not_register_the_job_leaves_it_alone(
        self, declare: Declare
    ) -> None:
        declare(nightly, cron="0 3 * * *")
        sync()
        forget(NAME)  # an older release's worker starting beside the new one
        result = sync()
        assert result.kept == [NAME]
        assert result.disabled == []
        row = Schedule.objects.get()
        assert row.enabled
        assert row.synced_spec is not None

    def test_a_process_that_registers_the_job_without_cron_disables_it(
        self, declare: Declare
    ) -> None:
        declare(nightly, cron="0 3 * * *")
        sync()
        declare(nightly)  # the new release removed the schedule
        assert sync().disabled == [NAME]
        assert not Schedule.objects.get().enabled
        assert sync().disabled == []  # once; an operator may enable it again
        declare(nightly, cron="0 3 * * *")
        assert sync().updated == [NAME]
        assert Schedule.objects.get().enabled

    def test_a_settings_entry_of_the_same_name_wins_with_a_warning(self, declare: Declare) -> None:
        declare(nightly, cron="0 3 * * *")
        sync()
        entry = {NAME: {"job": NAME, "cron": "30 1 * * *", "kwargs": {"note": "settings"}}}
        assert sync(entry).updated == [NAME]
        row = Schedule.objects.get()
        assert (row.cron, row.kwargs, row.from_settings, row.from_code) == (
            "30 1 * * *",
            {"note": "settings"},
            True,
            False,
        )
        assert sync(entry).unchanged == [NAME]
        with override_settings(LEASEJOBS_SCHEDULES=entry):
            warnings = schedule_checks.check_code_schedules()
        assert [w.id for w in warnings] == ["leasejobs.W012"]
        assert f"LEASEJOBS_SCHEDULES[{NAME!r}]" in warnings[0].msg
        assert "@job(cron='0 3 * * *')" in warnings[0].msg
        # The entry removed from settings: the job's own declaration takes the row back.
        assert sync().updated == [NAME]
        row = Schedule.objects.get()
        assert (row.cron, row.kwargs, row.from_code) == ("0 3 * * *", {}, True)

    def test_no_warning_without_a_clash(self, declare: Declare) -> None:
        declare(nightly, cron="0 3 * * *")
        entry = {"other": {"job": NAME, "cron": "30 1 * * *"}}
        with override_settings(LEASEJOBS_SCHEDULES=entry):
            assert schedule_checks.check_code_schedules() == []
            assert sorted(schedule_sync.sync_from_settings().created) == ["other", NAME]

    def test_a_settings_schedule_moved_into_code_keeps_its_cursor(self, declare: Declare) -> None:
        entry = {NAME: {"job": NAME, "cron": "0 3 * * *"}}
        declare(nightly)
        sync(entry)
        cursor = dt.datetime(2026, 1, 1, 3, tzinfo=dt.timezone.utc)
        Schedule.objects.update(last_occurrence_at=cursor)
        declare(nightly, cron="0 3 * * *")
        assert sync().updated == [NAME]
        row = Schedule.objects.get()
        assert (row.from_code, row.from_settings, row.enabled) == (True, False, True)
        assert row.last_occurrence_at == cursor

    def test_a_schedule_made_in_the_admin_is_not_taken_over(self, declare: Declare) -> None:
        Schedule.objects.create(name=NAME, cron="0 9 * * *", job=NAME)
        declare(nightly, cron="0 3 * * *")
        assert sync().conflicts == [NAME]
        assert Schedule.objects.get().cron == "0 9 * * *"

    def test_the_command_says_what_it_kept(self, declare: Declare) -> None:
        declare(nightly, cron="0 3 * * *")
        out = io.StringIO()
        call_command("syncschedules", stdout=out)
        assert f"{NAME}: created" in out.getvalue()
        forget(NAME)
        out = io.StringIO()
        call_command("syncschedules", stdout=out)
        assert f"{NAME}: kept, declared in code by a job this project does not register" in (
            out.getvalue()
        )
        assert "kept 1" in out.getvalue()


# --------------------------------------------------------------------------- occurrences


class TestOccurrences:
    def test_an_occurrence_is_emitted_once_and_runs_the_job(self, declare: Declare) -> None:
        declare(nightly, cron="* * * * *", misfire="latest")
        sync()
        Schedule.objects.update(created_at=shifted(-5 * 60))
        assert schedules.tick() == 1  # latest: the newest missed minute only
        assert schedules.tick() == 0
        sync()  # a second worker's start changes nothing
        assert schedules.tick() == 0
        emitted = Job.objects.get()
        assert emitted.name == NAME
        assert emitted.schedule.name == NAME
        assert emitted.occurrence_at.second == 0
        assert (emitted.args, emitted.kwargs) == ([], {})
        assert drain() == 1
        assert CALLS == ["nightly"]
        assert Job.objects.get().status == Status.SUCCEEDED

    def test_misfire_all_emits_each_missed_occurrence(self, declare: Declare) -> None:
        declare(nightly, cron="* * * * *", misfire="all")
        sync()
        # Mid-minute, two and a half minutes back on the database's clock: the three minute
        # starts since then are missed whatever second it is now (now minus 181 s took in a
        # fourth in a minute's first second, or when the tick crossed into the next minute).
        minute = Trunc(Now(), "minute", output_field=DateTimeField())
        mid_minute = minute - Value(dt.timedelta(seconds=150))
        Schedule.objects.update(created_at=ExpressionWrapper(mid_minute, DateTimeField()))
        assert schedules.tick() == 3
        occurrences = sorted(Job.objects.values_list("occurrence_at", flat=True))
        gaps = [later - earlier for earlier, later in itertools.pairwise(occurrences)]
        assert gaps == [dt.timedelta(minutes=1)] * 2

    def test_the_jobs_own_queue_and_priority_apply(self, declare: Declare) -> None:
        declare(nightly, cron="* * * * *", queue="reports", priority=7)
        sync()
        Schedule.objects.update(created_at=shifted(-2 * 60))
        assert schedules.tick() == 1
        assert Job.objects.values_list("queue", "priority").get() == ("reports", 7)
