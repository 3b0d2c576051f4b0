"""System checks: each fires on its misconfiguration and is silent on the default settings."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from django.core import checks as django_checks
from django.db import connection
from django.db.utils import ConnectionHandler
from django.test import override_settings

from django_leasejobs.checks import databases as db_checks
from django_leasejobs.checks import jobs as job_checks
from django_leasejobs.checks import schedules as schedule_checks
from django_leasejobs.checks import settings as setting_checks
from django_leasejobs.core import job_modules, registry
from django_leasejobs.jobs import job

from ..conftest import forget_module

GOOD_SCHEDULE = {"job": "testapp.jobs.noop", "cron": "0 3 * * *"}


def ids(messages: list[django_checks.CheckMessage]) -> list[str]:
    return [message.id or "" for message in messages]


def leasejobs_messages(**kwargs: object) -> list[django_checks.CheckMessage]:
    found = django_checks.run_checks(include_deployment_checks=False, **kwargs)  # type: ignore[arg-type]
    return [m for m in found if (m.id or "").startswith("leasejobs.")]


@pytest.mark.django_db
def test_silent_on_the_default_settings_including_the_database_checks(
    monkeypatch, settings
) -> None:
    # The suite's test modules register jobs after app loading, outside every app (W099 names
    # them, and W014 once they count as registered at start: tested below); the project's own
    # jobs are what this is about.
    monkeypatch.setattr(registry, "_late", set())
    settings.LEASEJOBS_TASK_MODULES = ["tests"]
    assert leasejobs_messages() == []
    found = leasejobs_messages(databases=["default"], tags=[django_checks.Tags.database])
    assert [m.id for m in found] == (["leasejobs.W016"] if autovacuum_off() else [])


def test_registered_with_django() -> None:
    registered = django_checks.registry.registry.get_checks(include_deployment_checks=False)
    assert {
        setting_checks.check_settings,
        schedule_checks.check_schedules_and_jobs,
        job_checks.check_job_modules,
    } <= set(registered)
    database_checks = django_checks.registry.registry.get_checks()
    assert db_checks.check_databases in database_checks
    assert list(db_checks.check_databases.tags) == [django_checks.Tags.database]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- settings


@override_settings(LEASEJOBS_MAX_ATTEMPTS=0, LEASEJOBS_BACKOFF_JITTER="random")
def test_e001_bad_setting_values_become_errors() -> None:
    messages = setting_checks.check_settings()
    assert ids(messages) == ["leasejobs.E001", "leasejobs.E001"]
    text = " ".join(m.msg for m in messages)
    assert "LEASEJOBS_MAX_ATTEMPTS must be at least 1" in text
    assert "LEASEJOBS_BACKOFF_JITTER must be one of" in text


@override_settings(LEASEJOBS_MAX_SNOOZES=-1)
def test_e001_a_bad_snooze_cap_is_an_error() -> None:
    (message,) = setting_checks.check_settings()
    assert message.id == "leasejobs.E001"
    assert "LEASEJOBS_MAX_SNOOZES must be at least 0, not -1" in message.msg


@override_settings(LEASEJOBS_JOB_LOGS={"level": "NOISY"})
def test_e001_a_bad_job_logs_level_is_an_error() -> None:
    (message,) = setting_checks.check_settings()
    assert message.id == "leasejobs.E001"
    assert 'LEASEJOBS_JOB_LOGS["level"] must be one of DEBUG' in message.msg


@override_settings(LEASEJOBS_TIMEOUT_SECONDS=-1)
def test_e001_a_bad_timeout_setting_is_an_error() -> None:
    (message,) = setting_checks.check_settings()
    assert message.id == "leasejobs.E001"
    assert "LEASEJOBS_TIMEOUT_SECONDS must be None or a positive number" in message.msg


@override_settings(LEASEJOBS_QUEUES=["default", "mail\n"], LEASEJOBS_DEFAULT_QUEUE="default\n")
def test_e001_queue_names_with_a_trailing_newline_are_errors() -> None:
    messages = setting_checks.check_settings()
    assert ids(messages) == ["leasejobs.E001", "leasejobs.E001"]
    text = " ".join(m.msg for m in messages)
    assert "LEASEJOBS_DEFAULT_QUEUE must be a queue name" in text
    assert "LEASEJOBS_QUEUES lists a name that is not a valid queue name: 'mail\\n'" in text


@override_settings(LEASEJOBS_MONITORING_TOKEN="hunter2")
def test_e001_a_short_monitoring_token_is_refused_without_showing_it() -> None:
    (message,) = setting_checks.check_settings()
    assert message.id == "leasejobs.E001"
    assert "LEASEJOBS_MONITORING_TOKEN must be None or" in message.msg
    assert "hunter2" not in message.msg


@override_settings(LEASEJOBS_LEASE_SECONDS=30, LEASEJOBS_HEARTBEAT_SECONDS=30)
def test_e002_heartbeat_not_shorter_than_the_lease() -> None:
    (message,) = setting_checks.check_settings()
    assert message.id == "leasejobs.E002"
    assert "HEARTBEAT_SECONDS (30) is not shorter than" in message.msg
    assert message.hint == "Renew at most every 10 s (a third of the lease)."


@pytest.mark.parametrize(("heartbeat", "expected"), [(21, ["leasejobs.W002"]), (20, []), (5, [])])
@override_settings(LEASEJOBS_LEASE_SECONDS=60)
def test_w002_heartbeat_more_than_a_third_of_the_lease(heartbeat: int, expected: list) -> None:
    with override_settings(LEASEJOBS_HEARTBEAT_SECONDS=heartbeat):
        assert ids(setting_checks.check_settings()) == expected


@override_settings(LEASEJOBS_HEARTBEAT=10, LEASEJOBS_QUEUE=["a"])
def test_w003_unknown_settings_are_named_with_a_suggestion() -> None:
    messages = setting_checks.check_settings()
    assert ids(messages) == ["leasejobs.W003", "leasejobs.W003"]
    assert (
        messages[0].msg == "LEASEJOBS_HEARTBEAT is not a django-leasejobs setting; it is ignored."
    )
    assert messages[0].hint == "Did you mean LEASEJOBS_HEARTBEAT_SECONDS?"
    assert messages[1].hint == "Did you mean LEASEJOBS_QUEUES?"


@pytest.mark.parametrize(
    ("use_tz", "time_zone", "refused"),
    [
        (True, "Europe/Paris", False),
        (False, "UTC", False),
        (False, "Europe/Paris", True),
        (False, "America/New_York", True),
    ],
)
def test_e009_local_naive_times_outside_utc(use_tz: bool, time_zone: str, refused: bool) -> None:
    with override_settings(USE_TZ=use_tz, TIME_ZONE=time_zone):
        ids = [message.id for message in setting_checks.check_settings()]
    assert ("leasejobs.E009" in ids) is refused


@pytest.mark.parametrize(
    ("eager", "debug", "warned"),
    [(True, False, True), (True, True, False), (False, False, False)],
)
def test_w007_eager_mode_outside_debug(eager: bool, debug: bool, warned: bool) -> None:
    """Eager mode runs every job inside the request that enqueued it: a test setting that
    reached production makes web requests run the jobs (and wait for them)."""
    with override_settings(LEASEJOBS_EAGER=eager, DEBUG=debug):
        messages = [m for m in setting_checks.check_settings() if m.id == "leasejobs.W007"]
    assert bool(messages) is warned
    if warned:
        (message,) = messages
        assert isinstance(message, django_checks.Warning)
        assert "LEASEJOBS_EAGER" in message.msg
        assert "DEBUG" in message.msg


@pytest.mark.parametrize(
    ("span", "retention", "kept"),
    [
        ("1d", {"succeeded": "1h", "dead": "30d"}, "1 day, 1:00:00"),
        ("1d", {"succeeded": "7d"}, None),
        ("1h", {"succeeded": "1h"}, None),
        ("1d", {}, None),
    ],
)
def test_w015_a_partition_span_longer_than_a_retention_age(
    span: str, retention: dict[str, str], kept: str | None
) -> None:
    """Retention drops whole history partitions: a span longer than an age keeps those jobs
    for the two together, more than twice what was asked."""
    with override_settings(LEASEJOBS_HISTORY_PARTITION=span, LEASEJOBS_RETENTION=retention):
        messages = [m for m in setting_checks.check_settings() if m.id == "leasejobs.W015"]
    if kept is None:
        assert messages == []
        return
    (message,) = messages
    assert isinstance(message, django_checks.Warning)
    assert "LEASEJOBS_HISTORY_PARTITION (1 day, 0:00:00)" in message.msg
    assert "succeeded: 1:00:00" in message.msg
    assert f"kept up to {kept}" in message.msg


@override_settings(LEASEJOBS_METRICS=True)
def test_e008_metrics_on_without_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setting_checks.check_settings() == []
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    (message,) = setting_checks.check_settings()
    assert message.id == "leasejobs.E008"
    assert "pip install 'django-leasejobs[metrics]'" in (message.hint or "")


# --------------------------------------------------------------------------- schedules and jobs


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0 3 * * *", "LEASEJOBS_SCHEDULES['nightly'] must be a dict, not str."),
        ({"job": "testapp.jobs.noop"}, "LEASEJOBS_SCHEDULES['nightly'] has no 'cron'."),
        ({"cron": "0 3 * * *"}, "LEASEJOBS_SCHEDULES['nightly'] has no 'job'."),
        (
            {**GOOD_SCHEDULE, "cron": "61 * * * *"},
            "has an invalid cron expression '61 * * * *'",
        ),
        ({**GOOD_SCHEDULE, "timezone": "Europe/Pariss"}, "has an unknown timezone 'Europe/Pariss'"),
        ({**GOOD_SCHEDULE, "cron": "* * * * * *"}, "6 fields; a cron expression has exactly five"),
        ({**GOOD_SCHEDULE, "cron": "0 0 30 2 *"}, "it never matches a date"),
    ],
)
def test_e003_malformed_schedules(spec: object, message: str) -> None:
    with override_settings(LEASEJOBS_SCHEDULES={"nightly": spec}):
        (found,) = schedule_checks.check_schedules_and_jobs()
    assert found.id == "leasejobs.E003"
    assert message in found.msg


@override_settings(
    LEASEJOBS_SCHEDULES={"nightly": {**GOOD_SCHEDULE, "timezone": "Europe/Paris", "queue": "x"}}
)
def test_a_good_schedule_is_silent() -> None:
    assert schedule_checks.check_schedules_and_jobs() == []


@override_settings(LEASEJOBS_SCHEDULES={"nightly": {"job": "testapp.jobs.nope", "cron": "@daily"}})
def test_e004_schedule_naming_an_unknown_job() -> None:
    (message,) = schedule_checks.check_schedules_and_jobs()
    assert message.id == "leasejobs.E004"
    assert "names the job 'testapp.jobs.nope', which is not registered" in message.msg


@override_settings(
    LEASEJOBS_QUEUES=["default", "other"],
    LEASEJOBS_SCHEDULES={"nightly": {**GOOD_SCHEDULE, "queue": "reports"}},
)
def test_e005_schedule_queue_not_declared() -> None:
    (message,) = schedule_checks.check_schedules_and_jobs()
    assert message.id == "leasejobs.E005"
    assert "queue 'reports', which is not in LEASEJOBS_QUEUES" in message.msg


def test_e006_a_job_registered_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_duplicates", set())
    assert schedule_checks.check_schedules_and_jobs() == []

    def first() -> None:
        pass

    def second() -> None:
        pass

    job(name="tests.twice")(first)
    job(name="tests.twice")(first)  # the same function again (a re-import) is fine
    assert schedule_checks.check_schedules_and_jobs() == []
    job(name="tests.twice")(second)
    (message,) = schedule_checks.check_schedules_and_jobs()
    assert message.id == "leasejobs.E006"
    assert "'tests.twice'" in message.msg


def test_e012_a_job_queue_not_declared_is_an_error() -> None:
    with override_settings(LEASEJOBS_QUEUES=["default"]):
        (message,) = schedule_checks.check_schedules_and_jobs()
    assert message.id == "leasejobs.E012"
    assert message.level == django_checks.ERROR
    assert "Job 'testapp.jobs.other_queue' goes to queue 'other'" in message.msg
    with override_settings(LEASEJOBS_QUEUES=["default", "other"]):
        assert schedule_checks.check_schedules_and_jobs() == []


def test_e013_the_default_queue_not_declared_is_one_error() -> None:
    """Jobs that name no queue use the default one: one message for them all."""
    with override_settings(LEASEJOBS_QUEUES=["other"]):
        (message,) = schedule_checks.check_schedules_and_jobs()
    assert message.id == "leasejobs.E013"
    assert message.level == django_checks.ERROR
    assert "LEASEJOBS_DEFAULT_QUEUE is 'default', which is not in LEASEJOBS_QUEUES" in message.msg
    with override_settings(LEASEJOBS_QUEUES=["other"], LEASEJOBS_DEFAULT_QUEUE="other"):
        assert schedule_checks.check_schedules_and_jobs() == []


# --------------------------------------------------------------------------- job modules


def by_job(messages: list[django_checks.CheckMessage]) -> dict[str, str]:
    """Each message's id by the job it names (the first quoted word)."""
    return {m.msg.split("'")[1]: m.id or "" for m in messages}


def test_w099_e099_jobs_registered_after_app_loading_that_a_worker_cannot_find(
    late_jobs: str, settings, monkeypatch
) -> None:
    monkeypatch.setattr(registry, "_late", set())  # not the other test modules' late jobs
    assert job_checks.check_job_modules() == []
    importlib.import_module(late_jobs)  # as a view's module would, not at start
    messages = job_checks.check_job_modules()
    assert by_job(messages) == {
        "tests.late_jobs.Reports.weekly": "leasejobs.W099",
        "tests.late_jobs.late_async": "leasejobs.W099",
        "tests.late_jobs.late_report": "leasejobs.W099",
        "tests.renamed_report": "leasejobs.E099",
    }
    warning = next(m for m in messages if "'tests.late_jobs.late_report'" in m.msg)
    assert "its module 'tests.late_jobs' is outside the installed apps' packages" in warning.msg
    assert "add 'tests.late_jobs' to LEASEJOBS_TASK_MODULES" in warning.hint
    error = next(m for m in messages if m.id == "leasejobs.E099")
    assert "(tests.late_jobs.renamed)" in error.msg
    assert "not a dotted path into its module 'tests.late_jobs'" in error.msg
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]  # a worker now imports the module
    assert by_job(job_checks.check_job_modules()) == {"tests.renamed_report": "leasejobs.E099"}


def test_w014_a_job_registered_at_start_from_a_module_no_worker_would_import(
    late_jobs: str, settings, monkeypatch
) -> None:
    importlib.import_module(late_jobs)
    monkeypatch.setattr(registry, "_late", set())  # as if the project's start imported it
    settings.LEASEJOBS_SCHEDULES = {
        "weekly": {"job": "tests.late_jobs.late_report", "cron": "@weekly"}
    }

    def found() -> dict[str, django_checks.CheckMessage]:
        messages = job_checks.check_outside_modules()
        return {m.msg.split("'")[1]: m for m in messages if late_jobs in m.msg}

    warnings = found()
    assert set(warnings) == {
        "tests.late_jobs.Reports.weekly",
        "tests.late_jobs.late_async",
        "tests.late_jobs.late_report",
        "tests.renamed_report",  # its name says nothing: its module is what a worker needs
    }
    warning = warnings["tests.late_jobs.late_report"]
    assert warning.id == "leasejobs.W014"
    assert warning.msg == (
        "Job 'tests.late_jobs.late_report' (schedules: weekly) is defined in 'tests.late_jobs', "
        "outside the installed apps' packages and LEASEJOBS_TASK_MODULES: a worker runs it "
        "only if its own start imports that module as this process's did. If it does not, "
        "the job's rows wait LEASEJOBS_UNKNOWN_JOB_GRACE (24 h by default), then are "
        "dead-lettered."
    )
    assert "add 'tests.late_jobs' to LEASEJOBS_TASK_MODULES" in warning.hint
    assert "leasejobs.W014" in {m.id for m in leasejobs_messages()}  # registered with Django
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]  # a worker imports it for a row
    assert found() == {}


def test_w099_sees_the_jobs_the_urlconf_registers(late_jobs: str) -> None:
    forget_module("tests.late_urls")
    with override_settings(ROOT_URLCONF="tests.late_urls"):
        found = by_job(job_checks.check_job_modules())
    assert found["tests.late_jobs.late_report"] == "leasejobs.W099"


def test_e004_says_what_to_do_and_finds_jobs_as_a_worker_does(late_jobs: str, settings) -> None:
    # One way of overriding only: the settings fixture, restored after the test. (A decorator
    # override beside it left the fixture restoring the decorator's value for good.)
    settings.LEASEJOBS_SCHEDULES = {"nightly": {"job": "x.y", "cron": "@daily"}}
    (message,) = schedule_checks.check_schedules_and_jobs()
    assert "'x.y', which is not registered (its module 'x' is outside" in message.msg
    assert job_modules.JOB_ADVICE in message.hint
    settings.LEASEJOBS_SCHEDULES = {
        "nightly": {"job": f"{late_jobs}.late_report", "cron": "@daily", "args": ["2030-01-01"]}
    }
    settings.LEASEJOBS_TASK_MODULES = [late_jobs]
    assert schedule_checks.check_schedules_and_jobs() == []


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "missing a required argument: 'a'"),
        ({"args": [1, 2, 3]}, "too many positional arguments"),
        ({"args": [1, 2], "kwargs": {"c": 2}}, "got an unexpected keyword argument 'c'"),
    ],
)
def test_e003_schedule_arguments_its_job_cannot_take(arguments: dict, problem: str) -> None:
    spec = {"job": "testapp.jobs.add", "cron": "@daily", **arguments}
    with override_settings(LEASEJOBS_SCHEDULES={"nightly": spec}):
        (found,) = schedule_checks.check_schedules_and_jobs()
    assert found.id == "leasejobs.E003"
    assert found.msg == (
        "LEASEJOBS_SCHEDULES['nightly']: Job 'testapp.jobs.add' cannot take these arguments: "
        f"{problem} (its signature: add(a, b))."
    )
    fitting = {"job": "testapp.jobs.add", "cron": "@daily", "args": [1], "kwargs": {"b": 2}}
    with override_settings(LEASEJOBS_SCHEDULES={"nightly": fitting}):
        assert schedule_checks.check_schedules_and_jobs() == []


# --------------------------------------------------------------------------- databases


@pytest.mark.parametrize(
    ("vendor", "version", "problem"),
    [
        ("postgresql", (12, 18), "PostgreSQL 13 or later is required; this database is"),
        ("postgresql", (13, 0), None),
        ("sqlite", (3, 34, 1), "SQLite 3.35 or later is required"),
        ("sqlite", (3, 35, 0), None),
        ("mariadb", (10, 5, 20), "MariaDB 10.6 or later is required"),
        ("mariadb", (10, 6, 0), None),
        ("mysql", (5, 7, 44), "MySQL 8.0 or later is required"),
        ("mysql", (8, 0, 36), None),
        ("oracle", (19,), "The oracle database backend is not supported"),
    ],
)
def test_e007_version_problem(vendor: str, version: tuple, problem: str | None) -> None:
    found = db_checks.version_problem(vendor, version)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def scratch_sqlite(path: Path, **options: object) -> ConnectionHandler:
    """A connection of its own to a fresh SQLite file (a real database, not the test one)."""
    return ConnectionHandler(
        {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path), "OPTIONS": options}}
    )


@pytest.mark.django_db  # lets pytest-django allow the scratch connection
def test_w001_sqlite_without_wal(tmp_path: Path) -> None:
    handler = scratch_sqlite(tmp_path / "rollback-journal.sqlite3")
    try:
        (message,) = db_checks.connection_messages(handler["default"])
    finally:
        handler.close_all()
    assert message.id == "leasejobs.W001"
    assert "journal mode 'delete', not WAL" in message.msg


def autovacuum_off() -> bool:
    """Whether the test database is a PostgreSQL server running without autovacuum (as read
    from ``pg_settings``, not by the check)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'autovacuum'")
        return cursor.fetchone()[0] == "off"


@pytest.mark.django_db
def test_w016_postgresql_without_autovacuum() -> None:
    """Said exactly when the server's autovacuum is off (a CI image may turn it off; the
    check's other side is the silence above on a server where it is on)."""
    messages = db_checks.connection_messages(connection)
    ids = [m.id for m in messages]
    if not autovacuum_off():
        assert "leasejobs.W016" not in ids
        return
    (message,) = messages
    assert message.id == "leasejobs.W016"
    assert "autovacuum off" in message.msg
    assert "VACUUM" in (message.hint or "")


@pytest.mark.django_db
def test_sqlite_with_wal_is_silent(tmp_path: Path) -> None:
    handler = scratch_sqlite(tmp_path / "wal.sqlite3", init_command="PRAGMA journal_mode=WAL;")
    try:
        assert db_checks.connection_messages(handler["default"]) == []
    finally:
        handler.close_all()


@override_settings(LEASEJOBS_OTEL_SPAN_RELATIONSHIP="parent")
def test_e001_a_bad_span_relationship_is_an_error() -> None:
    (message,) = setting_checks.check_settings()
    assert message.id == "leasejobs.E001"
    assert (
        "LEASEJOBS_OTEL_SPAN_RELATIONSHIP must be one of 'link', 'child', 'none', not 'parent'"
        in message.msg
    )
