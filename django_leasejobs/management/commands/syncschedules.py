"""``manage.py syncschedules``: make the database's schedules match ``LEASEJOBS_SCHEDULES``
and the ``@job(cron=...)`` declarations of the jobs this project registers.

Workers do the same at start; this command is for deploy scripts and for checking the setting.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser

from django_leasejobs.errors import ScheduleError
from django_leasejobs.management.base import LeaseJobsCommand
from django_leasejobs.models.databases import queue_databases, using_database
from django_leasejobs.upkeep import schedule_sync


class Command(LeaseJobsCommand):
    help = (
        "Create, update and disable schedules to match LEASEJOBS_SCHEDULES and @job(cron=...). "
        "Schedules made in the admin are left alone; removed ones are disabled, never deleted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Validate the setting and show what would change, without writing.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            aliases = queue_databases()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        for alias in aliases:
            if len(aliases) > 1:  # shards: each queue database holds its queues' schedules
                self.stdout.write(f"Database {alias}:")
            with using_database(alias):
                self._sync(options)

    def _sync(self, options: dict[str, Any]) -> None:
        dry_run = options["dry_run"]
        try:
            result = schedule_sync.sync_from_settings(dry_run=dry_run)
        except (ScheduleError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from None
        prefix = "would be " if dry_run else ""
        for label, names in result.as_dict().items():
            for name in names:
                if label == "conflicts":
                    self.stderr.write(
                        f"{name}: ignored, a schedule made in the admin has this name"
                    )
                elif label == "kept":
                    self.stdout.write(
                        f"{name}: kept, declared in code by a job this project does not "
                        "register (a newer release's?)"
                    )
                elif label != "unchanged" or options["verbosity"] > 1:
                    self.stdout.write(f"{name}: {prefix}{label}")
        summary = f"{'Dry run: ' if dry_run else ''}{result}"
        self.stdout.write(self.style.SUCCESS(summary) if not result.conflicts else summary)
