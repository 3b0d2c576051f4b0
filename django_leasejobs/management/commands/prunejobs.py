"""``manage.py prunejobs``: delete finished jobs by age, in small batches.

Succeeded, dead and cancelled jobs each have their own age; pending, running and failed jobs are
never touched. A dead job goes with its dead letter. Then the finished workflow runs whose jobs
are gone go, with their steps and edges, by the age of the state they map to (succeeded runs
by ``--succeeded-older-than``, failed ones by ``--dead-older-than``, cancelled ones by
``--cancelled-older-than``). Schedules keep their cursor, so pruning an
occurrence's job never lets the scheduler emit that occurrence again. The lease advisor's
per-hour runtime rows go with them (older than the longest age given, never those of the
advisor's 7-day window), and so do the dashboard's per-minute samples (older than
``--samples-older-than``, 7 days by default: the charts' longest range).
``--workers-older-than`` also deletes the rows of workers not seen for that long (killed ones:
a clean stop deletes its own, and running workers prune rows not seen for ten of their leases).
``--limiters-older-than`` deletes the limiter rows of rate windows that long past and of idle
concurrency keys.

On PostgreSQL the history partitions whose every job is past its age are dropped whole first
(docs/operations.md#history-partitions); the batches then delete the older jobs left (the
partition at the boundary, rows outside every partition).

With shards (``LEASEJOBS_QUEUE_DATABASES``) every queue database is pruned in turn, each under
a ``Database ALIAS:`` heading with its own counts; ``--database ALIAS`` prunes that one only
(``LeaseJobsCommand`` checks it and runs the command there).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from django_leasejobs import upkeep
from django_leasejobs.core.durations import format_age
from django_leasejobs.management import arguments
from django_leasejobs.management.base import (
    LeaseJobsCommand,
    add_database_option,
    in_batches,
    refuse_unmigrated,
)
from django_leasejobs.models import Status
from django_leasejobs.models.databases import queue_databases, using_database
from django_leasejobs.reports.advisor import WINDOW

SAMPLES_KEPT = dt.timedelta(days=7)
"""The dashboard's longest chart range: older samples are never drawn."""


OPTIONS: tuple[tuple[str, str], ...] = (
    ("succeeded_older_than", Status.SUCCEEDED),
    ("dead_older_than", Status.DEAD),
    ("cancelled_older_than", Status.CANCELLED),
)


class Command(LeaseJobsCommand):
    help = (
        "Delete succeeded, dead (with their dead letters) and cancelled jobs that finished "
        "longer ago than the given ages, in batches in primary-key order, then the finished "
        "workflow runs whose jobs are gone (succeeded, failed and cancelled runs by the "
        "succeeded, dead and cancelled ages)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        for option, status in OPTIONS:
            parser.add_argument(
                "--" + option.replace("_", "-"),
                type=arguments.duration,
                metavar="AGE",
                help=f"Delete {status} jobs finished longer ago than AGE (7d, 12h, 30m, 90s).",
            )
        parser.add_argument(
            "--workers-older-than",
            type=arguments.duration,
            metavar="AGE",
            help="Delete the rows of workers not seen for AGE (killed workers).",
        )
        parser.add_argument(
            "--limiters-older-than",
            type=arguments.duration,
            metavar="AGE",
            help="Delete rate limiter rows whose window began longer ago than AGE (at least the "
            "longest rate period), and concurrency limiter rows of keys with no running job.",
        )
        parser.add_argument(
            "--batch",
            type=arguments.batch_size,
            default=1000,
            metavar="N",
            help=f"Rows per transaction (1-{arguments.MAX_BATCH}, default 1000).",
        )
        parser.add_argument(
            "--samples-older-than",
            type=arguments.duration,
            default=SAMPLES_KEPT,
            metavar="AGE",
            help="Delete the dashboard's per-minute samples older than AGE (default 7d).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be deleted; delete nothing."
        )
        add_database_option(parser, default="every queue database, in turn")

    def handle(self, *args: Any, **options: Any) -> None:
        ages: dict[str, dt.timedelta] = {}
        for option, status in OPTIONS:
            age = _age(options[option], option)
            if age is not None:
                ages[status] = age
        samples_age = _age(options["samples_older_than"], "samples_older_than")
        workers_age = _age(options["workers_older_than"], "workers_older_than")
        limiters = _age(options["limiters_older_than"], "limiters_older_than")
        if not ages and workers_age is None and limiters is None:
            raise CommandError(
                "Nothing to prune: give --succeeded-older-than, --dead-older-than, "
                "--cancelled-older-than, --workers-older-than or --limiters-older-than "
                "(for example --succeeded-older-than 7d)."
            )
        if workers_age is not None and workers_age <= dt.timedelta(0):
            raise CommandError("--workers-older-than must be a positive age.")
        # One database when --database names it (execute runs this there), else each in turn.
        try:
            aliases = [options["database"]] if options.get("database") else queue_databases()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        for alias in aliases:
            if len(aliases) > 1:
                self.stdout.write(f"Database {alias}:")
            with using_database(alias):
                refuse_unmigrated(alias)
                self._prune_database(ages, samples_age, workers_age, limiters, options)

    def _prune_database(
        self,
        ages: dict[str, dt.timedelta],
        samples_age: dt.timedelta | None,
        workers_age: dt.timedelta | None,
        limiters: dt.timedelta | None,
        options: dict[str, Any],
    ) -> None:
        """Everything the options ask of the database worked on (``job_database``)."""
        batch = arguments.batch(options["batch"])
        for status, age in ages.items():
            if options["dry_run"]:
                found = upkeep.count_prunable(status, age)
                self.stdout.write(
                    f"{status}: would delete {found} jobs finished over {_label(age)} ago"
                )
            else:
                self._prune(status, age, batch)
        for status, age in ages.items():
            self._prune_runs(status, age, batch, options["dry_run"])
        self._prune_samples(SAMPLES_KEPT if samples_age is None else samples_age, options)
        self._prune_runtimes(max([*ages.values(), WINDOW]), options["dry_run"])
        if workers_age is not None:
            self._prune_workers(workers_age, options["dry_run"])
        if limiters is not None:
            self._prune_limiters(limiters, options["dry_run"], batch)

    def _prune(self, status: str, age: dt.timedelta, batch: int) -> None:
        dropped = upkeep.drop_expired(status, age)
        if dropped:
            self.stdout.write(
                f"{status}: dropped {dropped} history partition(s) of jobs finished over "
                f"{_label(age)} ago"
            )
        deleted, batches = in_batches(
            lambda after: upkeep.prune_finished(status, age, batch=batch, after_id=after), 0
        )
        self.stdout.write(
            f"{status}: deleted {deleted} jobs finished over {_label(age)} ago "
            f"in {batches} batch(es)"
        )

    def _prune_runs(self, status: str, age: dt.timedelta, batch: int, dry_run: bool) -> None:
        """The finished runs of the state ``status``'s age maps to, once their jobs are gone."""
        state = upkeep.RUN_STATES[status]
        if dry_run:
            found = upkeep.count_prunable_runs(status, age)
            self.stdout.write(
                f"{state} workflow runs: would delete {found} finished over {_label(age)} ago "
                "whose jobs are gone now"
            )
            return
        deleted, batches = in_batches(
            lambda after: upkeep.prune_runs(status, age, batch=batch, after_id=after), 0
        )
        self.stdout.write(
            f"{state} workflow runs: deleted {deleted} finished over {_label(age)} ago "
            f"in {batches} batch(es)"
        )

    def _prune_samples(self, age: dt.timedelta, options: dict[str, Any]) -> None:
        """The dashboard's history goes with the jobs, whichever job ages were given."""
        if options["dry_run"]:
            found = upkeep.count_prunable_samples(age)
            self.stdout.write(f"samples: would delete {found} older than {_label(age)}")
            return
        deleted = 0
        while count := upkeep.prune_samples(age, batch=options["batch"]):
            deleted += count
        self.stdout.write(f"samples: deleted {deleted} older than {_label(age)}")

    def _prune_runtimes(self, age: dt.timedelta, dry_run: bool) -> None:
        """The runtime rows of hours older than ``age``, for the lease advisor."""
        count = upkeep.prune_runtime_stats(age, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"runtime stats: {verb} {count} hourly rows over {_label(age)} old")

    def _prune_workers(self, age: dt.timedelta, dry_run: bool) -> None:
        if dry_run:
            found = upkeep.count_lost_workers(age)
            self.stdout.write(f"workers: would delete {found} not seen for {_label(age)}")
            return
        deleted = upkeep.prune_workers(age)
        self.stdout.write(f"workers: deleted {deleted} not seen for {_label(age)}")

    def _prune_limiters(self, age: dt.timedelta, dry_run: bool, batch: int) -> None:
        try:
            if dry_run:
                found = upkeep.count_prunable_limiters(age)
                self.stdout.write(f"limiters: would delete {found} rows")
                return
            deleted, batches = in_batches(
                lambda after: upkeep.prune_limiters(age, batch=batch, after_key=after), ""
            )
        except ValueError as exc:
            raise CommandError(f"--limiters-older-than: {exc}") from None
        self.stdout.write(
            f"limiters: deleted {deleted} rows of windows over {_label(age)} ago and idle keys "
            f"in {batches} batch(es)"
        )


def _age(value: Any, option: str) -> dt.timedelta | None:
    return arguments.given(value, arguments.duration, f"--{option.replace('_', '-')}", dt.timedelta)


def _label(age: dt.timedelta) -> str:
    return format_age(age.total_seconds())
