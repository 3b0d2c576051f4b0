"""App config: imports every installed app's ``jobs`` module so that ``@job`` functions register."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class LeaseJobsConfig(AppConfig):
    name = "django_leasejobs"
    label = "django_leasejobs"
    verbose_name = "Lease jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        autodiscover_modules("jobs")
        from . import checks, metrics

        checks.register()
        metrics.install_if_enabled()
