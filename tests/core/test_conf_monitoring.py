"""The monitoring settings: optional queue list, health thresholds and the metrics switch."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_leasejobs.core.conf import settings


def test_defaults_check_only_unserved_queues_and_declare_no_queues() -> None:
    assert settings.QUEUES is None
    assert settings.HEALTH_MAX_UNSERVED_AGE == 60.0
    assert settings.HEALTH_MAX_DUE_AGE is None
    assert settings.HEALTH_MAX_DEAD_PER_HOUR is None
    assert settings.HEALTH_MAX_EXPIRED_LEASES is None
    assert settings.METRICS is False


@override_settings(
    LEASEJOBS_QUEUES=("default", "mail"),
    LEASEJOBS_HEALTH_MAX_DUE_AGE=90,
    LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR=0,
    LEASEJOBS_HEALTH_MAX_EXPIRED_LEASES=3,
)
def test_values_are_typed() -> None:
    assert settings.QUEUES == ["default", "mail"]
    assert settings.HEALTH_MAX_DUE_AGE == 90.0
    assert settings.HEALTH_MAX_DEAD_PER_HOUR == 0
    assert settings.HEALTH_MAX_EXPIRED_LEASES == 3


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("LEASEJOBS_QUEUES", "default", "non-empty list of queue names"),
        ("LEASEJOBS_QUEUES", [], "non-empty list of queue names"),
        ("LEASEJOBS_QUEUES", ["ok", ""], "non-empty list of queue names"),
        ("LEASEJOBS_HEALTH_MAX_DUE_AGE", -1, "at least 0"),
        ("LEASEJOBS_HEALTH_MAX_DUE_AGE", "60s", "must be a number"),
        ("LEASEJOBS_HEALTH_MAX_DEAD_PER_HOUR", 1.5, "must be an integer"),
        ("LEASEJOBS_HEALTH_MAX_EXPIRED_LEASES", -2, "at least 0"),
        ("LEASEJOBS_HEALTH_MAX_UNSERVED_AGE", -1, "at least 0"),
        ("LEASEJOBS_HEALTH_MAX_UNSERVED_AGE", "1m", "must be a number"),
        ("LEASEJOBS_METRICS", "yes", "True or False"),
    ],
)
def test_bad_values_name_the_setting(name: str, value: object, message: str) -> None:
    with override_settings(**{name: value}), pytest.raises(ImproperlyConfigured) as info:
        getattr(settings, name.removeprefix("LEASEJOBS_"))
    assert name in str(info.value)
    assert message in str(info.value)
