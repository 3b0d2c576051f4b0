"""Settings: typed defaults, and a clear ImproperlyConfigured for a bad value."""

from __future__ import annotations

import logging
import random

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_leasejobs import Backoff
from django_leasejobs.core.conf import settings


def test_defaults() -> None:
    assert settings.DEFAULT_QUEUE == "default"
    assert settings.MAX_ATTEMPTS == 5
    assert settings.MAX_SNOOZES == 100
    assert settings.LEASE_SECONDS == 60.0
    assert settings.BACKOFF_JITTER == "equal"
    assert settings.MISFIRE_GRACE_SECONDS == 60
    with override_settings():
        from django.conf import settings as django_settings

        del django_settings.LEASEJOBS_SCHEDULES  # the test project declares a demo schedule
        assert settings.SCHEDULES == {}
    assert settings.SCHEDULES == {}
    assert settings.NOTIFY is True
    assert settings.MONITORING_TOKEN is None
    assert settings.TIMEOUT_SECONDS is None
    assert settings.JOB_LOGS == logging.INFO
    assert settings.DATABASE is None


def test_no_replica_is_read_by_default() -> None:
    assert settings.READ_DATABASES == {}
    assert settings.READ_MAX_LAG == 30.0


@override_settings(LEASEJOBS_READ_DATABASES={"default": "default"}, LEASEJOBS_READ_MAX_LAG=5)
def test_a_replica_of_the_queue_database() -> None:
    assert settings.READ_DATABASES == {"default": "default"}
    assert settings.READ_MAX_LAG == 5.0


@override_settings(LEASEJOBS_DATABASE="default")
def test_the_queue_database_is_an_alias_of_databases() -> None:
    assert settings.DATABASE == "default"


@pytest.mark.parametrize(
    ("value", "level"),
    [(None, None), ({}, logging.INFO), ({"level": "warning"}, logging.WARNING), ({"level": 5}, 5)],
)
def test_job_logs_is_read_as_a_level(value: object, level: int | None) -> None:
    with override_settings(LEASEJOBS_JOB_LOGS=value):
        assert level == settings.JOB_LOGS


@override_settings(LEASEJOBS_TIMEOUT_SECONDS=90)
def test_a_timeout_setting_is_kept_as_seconds() -> None:
    assert settings.TIMEOUT_SECONDS == 90.0


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("LEASEJOBS_MAX_ATTEMPTS", 0, "at least 1"),
        ("LEASEJOBS_MAX_ATTEMPTS", "5", "must be an integer"),
        ("LEASEJOBS_MAX_ATTEMPTS", True, "must be an integer"),
        ("LEASEJOBS_MAX_ATTEMPTS", 2**31, "at most 2147483647"),
        ("LEASEJOBS_MAX_SNOOZES", -1, "at least 0"),
        ("LEASEJOBS_MAX_SNOOZES", 2.5, "must be an integer"),
        ("LEASEJOBS_MAX_SNOOZES", "100", "must be an integer"),
        ("LEASEJOBS_MAX_SNOOZES", None, "must be an integer"),
        ("LEASEJOBS_MAX_SNOOZES", 2**31, "at most 2147483647"),
        ("LEASEJOBS_LEASE_SECONDS", 0, "at least 1"),
        ("LEASEJOBS_HEARTBEAT_SECONDS", "fast", "must be a number"),
        ("LEASEJOBS_BACKOFF_JITTER", "random", "must be one of"),
        ("LEASEJOBS_DEFAULT_QUEUE", "", "a queue name"),
        ("LEASEJOBS_DEFAULT_QUEUE", "default\n", "a queue name (1-100 of letters"),
        ("LEASEJOBS_QUEUES", ["default", "mail\n"], "not a valid queue name: 'mail\\n'"),
        ("LEASEJOBS_QUEUES", ["has space"], "not a valid queue name: 'has space'"),
        ("LEASEJOBS_QUEUES", [], "non-empty list of queue names"),
        ("LEASEJOBS_SCHEDULES", [], "must be a dict"),
        ("LEASEJOBS_MAX_PAYLOAD_BYTES", 1.5, "must be an integer"),
        ("LEASEJOBS_MISFIRE_GRACE_SECONDS", 0, "at least 1"),
        ("LEASEJOBS_NOTIFY", "yes", "must be True or False"),
        ("LEASEJOBS_TIMEOUT_SECONDS", 0, "None or a positive number of seconds, not 0"),
        ("LEASEJOBS_TIMEOUT_SECONDS", -5, "None or a positive number of seconds"),
        ("LEASEJOBS_TIMEOUT_SECONDS", float("inf"), "None or a positive number of seconds"),
        ("LEASEJOBS_TIMEOUT_SECONDS", float("nan"), "None or a positive number of seconds"),
        ("LEASEJOBS_TIMEOUT_SECONDS", "30", "None or a positive number of seconds, not '30'"),
        ("LEASEJOBS_TIMEOUT_SECONDS", True, "None or a positive number of seconds"),
        ("LEASEJOBS_MONITORING_TOKEN", 12345, "not a value of type int"),
        ("LEASEJOBS_MONITORING_TOKEN", "", "at least 32 characters"),
        ("LEASEJOBS_MONITORING_TOKEN", "short-token", "at least 32 characters"),
        ("LEASEJOBS_MONITORING_TOKEN", "x" * 31 + " y", "A-Z a-z 0-9"),
        ("LEASEJOBS_MONITORING_TOKEN", "\u00e9" * 40, "A-Z a-z 0-9"),
        ("LEASEJOBS_JOB_LOGS", "INFO", 'must be a dict such as {"level": "INFO"}, or None'),
        ("LEASEJOBS_JOB_LOGS", {"level": "LOUD"}, "must be one of DEBUG, INFO, WARNING"),
        ("LEASEJOBS_JOB_LOGS", {"level": True}, "not True"),
        ("LEASEJOBS_JOB_LOGS", {"level": 99}, "(or 0 to 50), not 99"),
        ("LEASEJOBS_JOB_LOGS", {"level": "INFO", "cap": 1}, "unknown keys cap"),
        ("LEASEJOBS_DATABASE", 5, "alias of a database in DATABASES (a string), not 5"),
        ("LEASEJOBS_DATABASE", "", "alias of a database in DATABASES (a string), not ''"),
        ("LEASEJOBS_DATABASE", ["jobs"], "(a string), not ['jobs']"),
        ("LEASEJOBS_DATABASE", "jobs", "'jobs', which is not a database in DATABASES (there are:"),
        ("LEASEJOBS_READ_DATABASES", "jobs_replica", "must be a dict of queue database -> replica"),
        ("LEASEJOBS_READ_DATABASES", [("default", "r")], 'such as {"jobs": "jobs_replica"}'),
        ("LEASEJOBS_READ_DATABASES", {"default": 5}, "map database aliases (strings)"),
        ("LEASEJOBS_READ_DATABASES", {"default": ""}, "map database aliases (strings)"),
        (
            "LEASEJOBS_READ_DATABASES",
            {"default": "jobs_replica"},
            "names 'jobs_replica' ('default': 'jobs_replica'), which is not a database in "
            "DATABASES (there are: 'default', 'shard')",
        ),
        ("LEASEJOBS_QUEUE_DATABASES", "shard", "must be a dict of queue name (or glob)"),
        ("LEASEJOBS_QUEUE_DATABASES", {"reports": "jobs2"}, "'jobs2', which is not a database"),
        ("LEASEJOBS_QUEUE_DATABASES", {" ": "shard"}, "non-empty strings), not ' '"),
        ("LEASEJOBS_READ_DATABASES", {"jobs": "default"}, "names 'jobs' ('jobs': 'default')"),
        ("LEASEJOBS_READ_MAX_LAG", -1, "must be at least 0"),
        ("LEASEJOBS_READ_MAX_LAG", "30s", "must be a number"),
    ],
)
def test_bad_settings_name_the_setting(name: str, value: object, message: str) -> None:
    attribute = name.removeprefix("LEASEJOBS_")
    with override_settings(**{name: value}), pytest.raises(ImproperlyConfigured) as info:
        getattr(settings, attribute)
    assert name in str(info.value)
    assert message in str(info.value)
    if name == "LEASEJOBS_MONITORING_TOKEN" and isinstance(value, str) and value:
        assert value not in str(info.value)  # a secret is never echoed into logs or checks


def test_a_good_monitoring_token_is_kept_as_given() -> None:
    token = "Abc-._~+/" + "z" * 30 + "=="  # RFC 6750's token characters, padding last
    with override_settings(LEASEJOBS_MONITORING_TOKEN=token):
        assert token == settings.MONITORING_TOKEN


@override_settings(
    LEASEJOBS_BACKOFF_BASE=1, LEASEJOBS_BACKOFF_CAP=8, LEASEJOBS_BACKOFF_JITTER="none"
)
def test_backoff_from_settings_doubles_and_caps() -> None:
    backoff = Backoff.from_settings()
    assert [backoff.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": -1}, "must not be negative"),
        ({"jitter": "chaos"}, "must be one of"),
    ],
)
def test_bad_backoff(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(**kwargs)


@pytest.mark.fuzz
@given(
    attempt=st.integers(min_value=1, max_value=10_000),
    base=st.floats(min_value=0, max_value=1e4),
    cap=st.floats(min_value=0, max_value=1e6),
    jitter=st.sampled_from(["full", "equal", "none"]),
    seed=st.integers(),
)
def test_backoff_stays_within_its_bounds(
    attempt: int, base: float, cap: float, jitter: str, seed: int
) -> None:
    backoff = Backoff(base, cap, jitter)
    delay = backoff.delay(attempt, random.Random(seed))
    ceiling = backoff.ceiling(attempt)
    assert 0 <= delay <= ceiling <= cap
    if jitter == "equal":
        assert delay >= ceiling / 2
    if jitter == "none":
        assert delay == ceiling


def test_a_setting_is_read_once_and_again_when_django_says_it_changed() -> None:
    from django.conf import settings as django_settings

    assert settings.MAX_ATTEMPTS == 5
    # Kept: a value set behind Django's back (no setting_changed) is not seen...
    django_settings.LEASEJOBS_MAX_ATTEMPTS = 9
    try:
        assert settings.MAX_ATTEMPTS == 5
    finally:
        del django_settings.LEASEJOBS_MAX_ATTEMPTS
    # ...while override_settings (and pytest-django's settings fixture) are, both ways.
    with override_settings(LEASEJOBS_MAX_ATTEMPTS=7):
        assert settings.MAX_ATTEMPTS == 7
    assert settings.MAX_ATTEMPTS == 5


def test_a_bad_value_is_refused_on_every_read_and_never_kept() -> None:
    with override_settings(LEASEJOBS_MAX_PAYLOAD_BYTES=0):
        for _ in range(2):
            with pytest.raises(ImproperlyConfigured, match="LEASEJOBS_MAX_PAYLOAD_BYTES"):
                _ = settings.MAX_PAYLOAD_BYTES
    assert settings.MAX_PAYLOAD_BYTES == 256 * 1024
