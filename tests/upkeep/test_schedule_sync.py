"""LEASEJOBS_SCHEDULES -> the database: validation, sync, ``manage.py syncschedules``, clean()."""

from __future__ import annotations

import math
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_leasejobs.errors import ScheduleError
from django_leasejobs.models import Schedule
from django_leasejobs.upkeep import schedule_sync

from ..conftest import shifted

pytestmark = pytest.mark.django_db

NOOP = "testapp.jobs.noop"
NIGHTLY = {"job": NOOP, "cron": "0 3 * * *", "timezone": "Europe/Paris"}


def sync(specs: dict[str, Any], **options: Any) -> schedule_sync.SyncResult:
    with override_settings(LEASEJOBS_SCHEDULES=specs):
        return schedule_sync.sync_from_settings(**options)


def command(specs: Any, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    with override_settings(LEASEJOBS_SCHEDULES=specs):
        call_command("syncschedules", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


BAD_SPECS = [
    ({"job": NOOP, "cron": "61 * * * *"}, "invalid cron expression '61 * * * *'"),
    ({"job": NOOP, "cron": "* * * * * *"}, "6 fields; a cron expression has exactly five"),
    ({"job": NOOP, "cron": "0 0 30 2 *"}, "never matches a date"),
    (
        {"job": NOOP, "cron": "@daily", "timezone": "Mars/Olympus"},
        "unknown timezone 'Mars/Olympus'",
    ),
    ({"job": "nowhere.jobs.missing", "cron": "@daily"}, "no job is registered as 'nowhere.jobs"),
    ({"job": NOOP, "cron": "@daily", "misfire": "often"}, "misfire must be one of all, latest"),
    ({"job": NOOP, "cron": "@daily", "jitter": -5}, "jitter must be 0 or more seconds, not -5"),
    ({"job": NOOP, "cron": "@daily", "jitter": "5"}, "jitter must be a whole number of seconds"),
    ({"job": NOOP, "cron": "@daily", "jitter": 1.5}, "jitter must be a whole number of seconds"),
    ({"job": NOOP, "cron": "@daily", "catchup_window": 0}, "catchup_window must be at least 1"),
    ({"job": NOOP, "cron": "@daily", "enabled": "yes"}, "enabled must be True or False"),
    ({"job": NOOP, "cron": "@daily", "args": "x"}, "args must be a list"),
    ({"job": NOOP, "cron": "@daily", "args": [math.nan]}, "NaN"),
    ({"job": NOOP, "cron": "@daily", "kwargs": {"when": object()}}, "not JSON"),
    ({"job": NOOP, "cron": "@daily", "args": [1]}, "cannot take these arguments: too many"),
    (
        {"job": NOOP, "cron": "@daily", "kwargs": {"day": 1}},
        "cannot take these arguments: got an unexpected keyword argument 'day'",
    ),
    ({"job": NOOP, "cron": "@daily", "priority": 500}, "priority 500 is out of range"),
    ({"job": NOOP, "cron": "@daily", "priority": True}, "priority must be an integer"),
    (
        {"job": NOOP, "cron": "@daily", "max_attempts": 0},
        "max_attempts must be an integer from 1 to",
    ),
    ({"job": NOOP, "cron": "@daily", "queue": "no spaces"}, "not a valid queue name"),
    ({"job": NOOP}, "missing required 'cron'"),
    ({"cron": "@daily"}, "missing required 'job'"),
    ({"job": NOOP, "cron": "@daily", "crontab": "x"}, "unknown keys crontab"),
    ("0 3 * * *", "the entry must be a dict with at least 'job' and 'cron', not str"),
    ({"job": NOOP, "cron": "R * * * *"}, "the minute field 'R' is a random value (R)"),
    ({"job": NOOP, "cron": "0 H * * *"}, "the hour field 'H' is a hashed value (H)"),
    ({"job": NOOP, "cron": "@daily", "args": [1, 1e16]}, "args[1] contains 1e+16: a float"),
    ({"job": NOOP, "cron": "@daily", "kwargs": {"x": -0.0}}, "kwargs['x'] contains -0.0: "),
]


class TestValidateSpec:
    @pytest.mark.parametrize(("spec", "message"), BAD_SPECS)
    def test_bad_entries_are_refused_naming_the_schedule_and_the_problem(
        self, spec: Any, message: str
    ) -> None:
        with pytest.raises(ScheduleError) as caught:
            schedule_sync.validate_schedule_spec("nightly", spec)
        assert str(caught.value).startswith("Schedule 'nightly': ")
        assert message in str(caught.value)

    def test_every_problem_is_listed_at_once(self) -> None:
        spec = {"job": "nowhere.x", "cron": "61 * * * *", "timezone": "Mars/Olympus"}
        with pytest.raises(ScheduleError) as caught:
            schedule_sync.validate_schedule_spec("nightly", spec)
        for fragment in ("invalid cron", "unknown timezone", "no job is registered"):
            assert fragment in str(caught.value)

    @pytest.mark.parametrize("name", ["", "  ", 7, "x" * 201])
    def test_bad_names_are_refused(self, name: Any) -> None:
        with pytest.raises(ScheduleError, match=r"Schedule name .* is not valid"):
            schedule_sync.validate_schedule_spec(name, NIGHTLY)

    def test_defaults_fill_what_is_not_given(self) -> None:
        fields = schedule_sync.validate_schedule_spec("nightly", {"job": NOOP, "cron": "@daily"})
        assert fields == {
            "job": NOOP,
            "cron": "@daily",
            "timezone": "UTC",
            "args": [],
            "kwargs": {},
            "queue": "",
            "priority": None,
            "max_attempts": None,
            "jitter": 0,
            "misfire": "latest",
            "enabled": True,
            "catchup_window": 3600,
        }


class TestModelClean:
    def test_clean_refuses_what_sync_refuses_naming_the_schedule(self) -> None:
        schedule = Schedule(name="admin-made", cron="61 * * * *", timezone="Nowhere", job="x.y")
        with pytest.raises(ValidationError) as caught:
            schedule.full_clean()
        errors = caught.value.message_dict
        assert set(errors) == {"cron", "timezone", "job"}
        assert all(
            message.startswith("Schedule 'admin-made': ") for m in errors.values() for message in m
        )
        assert "out of range" in errors["cron"][0]

    def test_field_checks_cover_misfire_and_negative_jitter(self) -> None:
        schedule = Schedule(name="s", cron="@daily", job=NOOP, misfire="often", jitter=-1)
        with pytest.raises(ValidationError) as caught:
            schedule.full_clean()
        assert set(caught.value.message_dict) == {"misfire", "jitter"}

    @pytest.mark.parametrize("cron", ["R * * * *", "0 r * * *", "H/10 * * * *"])
    def test_clean_refuses_random_and_hashed_fields(self, cron: str) -> None:
        schedule = Schedule(name="s", cron=cron, job=NOOP)
        with pytest.raises(ValidationError) as caught:
            schedule.full_clean()
        assert set(caught.value.message_dict) == {"cron"}
        assert "write the value you want" in caught.value.message_dict["cron"][0]

    def test_clean_refuses_floats_that_would_come_back_changed(self) -> None:
        schedule = Schedule(name="s", cron="@daily", job=NOOP, args=[1e16], kwargs={"x": -0.0})
        with pytest.raises(ValidationError) as caught:
            schedule.full_clean()
        assert set(caught.value.message_dict) == {"args"}
        assert "args[0] contains 1e+16" in caught.value.message_dict["args"][0]

    def test_a_valid_schedule_is_clean(self) -> None:
        Schedule(name="s", cron="*/5 * * * *", timezone="Asia/Tokyo", job=NOOP).full_clean()


class TestSync:
    def test_creates_updates_and_disables(self) -> None:
        result = sync({"nightly": NIGHTLY, "hourly": {"job": NOOP, "cron": "@hourly"}})
        assert (sorted(result.created), result.updated, result.disabled) == (
            ["hourly", "nightly"],
            [],
            [],
        )
        nightly = Schedule.objects.get(name="nightly")
        assert (nightly.cron, nightly.timezone, nightly.from_settings, nightly.enabled) == (
            "0 3 * * *",
            "Europe/Paris",
            True,
            True,
        )
        result = sync({"nightly": {**NIGHTLY, "cron": "0 4 * * *", "jitter": 30}})
        assert (result.created, result.updated, result.disabled) == ([], ["nightly"], ["hourly"])
        nightly.refresh_from_db()
        assert (nightly.cron, nightly.jitter) == ("0 4 * * *", 30)
        hourly = Schedule.objects.get(name="hourly")
        assert not hourly.enabled  # kept, with its history
        assert sync({"nightly": {**NIGHTLY, "cron": "0 4 * * *", "jitter": 30}}).unchanged == [
            "nightly"
        ]

    def test_a_schedule_put_back_in_settings_is_enabled_again(self) -> None:
        sync({"hourly": {"job": NOOP, "cron": "@hourly"}})
        assert sync({}).disabled == ["hourly"]
        assert sync({}).disabled == []
        assert sync({"hourly": {"job": NOOP, "cron": "@hourly"}}).updated == ["hourly"]
        assert Schedule.objects.get(name="hourly").enabled

    def test_the_cursor_survives_an_update(self) -> None:
        sync({"nightly": NIGHTLY})
        Schedule.objects.update(last_occurrence_at=shifted(-60))
        cursor = Schedule.objects.get().last_occurrence_at
        sync({"nightly": {**NIGHTLY, "cron": "0 5 * * *"}})
        assert Schedule.objects.get().last_occurrence_at == cursor

    def test_an_admin_edit_stays_until_the_settings_entry_changes(self) -> None:
        sync({"nightly": NIGHTLY})
        Schedule.objects.filter(name="nightly").update(enabled=False)  # an operator pauses it
        assert sync({"nightly": NIGHTLY}).unchanged == ["nightly"]
        assert not Schedule.objects.get().enabled
        assert sync({"nightly": {**NIGHTLY, "cron": "0 5 * * *"}}).updated == ["nightly"]
        assert Schedule.objects.get().enabled

    def test_schedules_made_in_the_admin_are_left_alone(self) -> None:
        Schedule.objects.create(name="nightly", cron="0 1 * * *", job=NOOP)
        Schedule.objects.create(name="adhoc", cron="0 2 * * *", job=NOOP)
        result = sync({"nightly": NIGHTLY})
        assert (result.conflicts, result.created, result.disabled) == (["nightly"], [], [])
        assert list(Schedule.objects.values_list("name", "cron", "enabled")) == [
            ("adhoc", "0 2 * * *", True),
            ("nightly", "0 1 * * *", True),
        ]

    def test_one_invalid_entry_writes_nothing(self) -> None:
        bad = {"nightly": NIGHTLY, "broken": {"job": NOOP, "cron": "61 * * * *"}}
        with pytest.raises(
            ScheduleError, match=r"1 invalid schedule.*\nSchedule 'broken': invalid"
        ):
            sync(bad)
        assert not Schedule.objects.exists()

    def test_a_dry_run_writes_nothing(self) -> None:
        result = sync({"nightly": NIGHTLY}, dry_run=True)
        assert result.created == ["nightly"]
        assert not Schedule.objects.exists()

    @override_settings(LEASEJOBS_SCHEDULES=["nightly"])
    def test_the_setting_must_be_a_dict(self) -> None:
        with pytest.raises(Exception, match="LEASEJOBS_SCHEDULES must be a dict"):
            schedule_sync.sync_from_settings()


class TestCommand:
    def test_reports_what_changed(self) -> None:
        out, _ = command({"nightly": NIGHTLY})
        assert "nightly: created" in out
        assert "created 1 (nightly), updated 0, disabled 0, unchanged 0, conflicts 0" in out
        out, _ = command({})
        assert "nightly: disabled" in out

    def test_dry_run(self) -> None:
        out, _ = command({"nightly": NIGHTLY}, "--dry-run")
        assert "nightly: would be created" in out
        assert out.strip().splitlines()[-1].startswith("Dry run: created 1")
        assert not Schedule.objects.exists()

    def test_conflicts_go_to_stderr(self) -> None:
        Schedule.objects.create(name="nightly", cron="0 1 * * *", job=NOOP)
        _, err = command({"nightly": NIGHTLY})
        assert "nightly: ignored, a schedule made in the admin has this name" in err

    @pytest.mark.parametrize(("spec", "message"), BAD_SPECS[:6])
    def test_bad_settings_fail_with_the_message(self, spec: Any, message: str) -> None:
        with pytest.raises(CommandError, match="nothing was synced") as caught:
            command({"nightly": spec})
        assert message in str(caught.value)
        assert "Schedule 'nightly': " in str(caught.value)
        assert not Schedule.objects.exists()

    @pytest.mark.parametrize("cron", ["R * * * *", "0 H * * *"])
    def test_random_and_hashed_fields_fail_and_nothing_is_synced(self, cron: str) -> None:
        with pytest.raises(CommandError, match="nothing was synced") as caught:
            command({"nightly": NIGHTLY, "spiky": {"job": NOOP, "cron": cron}})
        assert f"Schedule 'spiky': invalid cron expression '{cron}': the " in str(caught.value)
        assert not Schedule.objects.exists()

    @pytest.mark.parametrize("args", [[-0.0], [2.5e16]])
    def test_floats_that_would_come_back_changed_fail_and_nothing_is_synced(self, args) -> None:
        with pytest.raises(CommandError, match="nothing was synced") as caught:
            command({"nightly": {**NIGHTLY, "args": args}})
        assert f"Schedule 'nightly': args[0] contains {args[0]!r}: " in str(caught.value)
        assert not Schedule.objects.exists()

    def test_a_setting_that_is_not_a_dict_fails_with_the_message(self) -> None:
        with pytest.raises(CommandError, match="LEASEJOBS_SCHEDULES must be a dict"):
            command("0 3 * * *")
