"""The API's settings, its system checks and the ``@job(api=...)`` option refuse bad values."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_leasejobs.checks import schedules as schedule_checks
from django_leasejobs.checks import settings as setting_checks
from django_leasejobs.core import registry
from django_leasejobs.core.conf import settings as conf


@pytest.mark.parametrize("value", ["testapp.jobs.add", [1], [""], 5])
def test_api_jobs_setting_must_be_a_list_of_names(settings, value):
    settings.LEASEJOBS_API_JOBS = value
    with pytest.raises(ImproperlyConfigured, match="LEASEJOBS_API_JOBS"):
        _ = conf.API_JOBS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("API_MAX_BODY_BYTES", 10),
        ("API_PAGE_SIZE", 0),
        ("API_MAX_PAGE_SIZE", "5"),
        ("API_MAX_BATCH", 1.5),
        ("API_MAX_ATTEMPTS", 0),
        ("API_MAX_ATTEMPTS", 2**31),
        ("API_MAX_ATTEMPTS", "100"),
    ],
)
def test_api_limits_must_be_sane(settings, name, value):
    setattr(settings, f"LEASEJOBS_{name}", value)
    with pytest.raises(ImproperlyConfigured, match=name):
        getattr(conf, name)


def test_check_reports_unregistered_api_job_and_page_sizes(settings):
    settings.LEASEJOBS_API_JOBS = ["testapp.jobs.add", "testapp.jobs.typo"]
    found = [(m.id, m.msg) for m in schedule_checks.check_schedules_and_jobs()]
    assert (
        "leasejobs.E010",
        "LEASEJOBS_API_JOBS lists 'testapp.jobs.typo', which is not a registered job.",
    ) in found
    settings.LEASEJOBS_API_PAGE_SIZE = 600
    assert "leasejobs.E011" in [m.id for m in setting_checks.check_settings()]


def test_job_api_option_must_be_a_bool():
    def handler() -> None: ...

    with pytest.raises(ValueError, match="api must be True or False"):
        registry.JobSpec(handler, name="x.y", api="yes")
    assert registry.JobSpec(handler, name="x.y", api=True).api is True
