"""App config: imports every installed app's ``jobs`` module so that ``@job`` functions register,
and sets up each new database session as its dialect asks (MySQL's in UTC: see
:mod:`django_leasejobs.dialects.session`)."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.utils.module_loading import autodiscover_modules


class LeaseJobsConfig(AppConfig):
    name = "django_leasejobs"
    label = "django_leasejobs"
    verbose_name = "Lease jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .dialects import prepare_session

        connection_created.connect(prepare_session, dispatch_uid="leasejobs_mysql_utc")
        autodiscover_modules("jobs")
        from . import checks, metrics
        from .db import migration_state

        checks.register()
        migration_state.register()
        metrics.install_if_enabled()
        from .tasks import rows

        rows.register()  # the worker and the protocol reach django.tasks rows through it

    def notifies(self, alias: str) -> bool:
        """``dialects.notifies``, for the models, which sit below the dialects and import
        none: ``job.wait()`` listens for finishes where the database announces them."""
        from . import dialects

        return dialects.notifies(alias)
