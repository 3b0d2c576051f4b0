"""``manage.py benchworker``: throughput of ``runjobworker --burst`` on no-op jobs.

For each process count: enqueue N no-op jobs (one bulk insert), start that many
``runjobworker --burst`` subprocesses on the same database, wait for them to exit, check every job
succeeded, and print jobs/s twice: over the wall time (process start-up included) and over the
database's own first-claim-to-last-finish window.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.models import Max, Min

from django_leasejobs.models import Job, Status
from testapp import jobs

MANAGE = Path(__file__).resolve().parents[3] / "manage.py"


class Command(BaseCommand):
    help = "Measure runjobworker --burst throughput on no-op jobs with 1, 2, ... processes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", type=int, default=10_000)
        parser.add_argument("--processes", default="1,2", help="Comma-separated counts (1,2).")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--batch", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        count = options["jobs"]
        try:
            process_counts = [int(p) for p in options["processes"].split(",")]
        except ValueError:
            raise CommandError("--processes takes comma-separated integers, e.g. 1,2") from None
        if count < 1 or any(p < 1 for p in process_counts):
            raise CommandError("--jobs and --processes must be positive")
        worker_args = ["--concurrency", str(options["concurrency"])]
        if options["batch"]:
            worker_args += ["--batch", str(options["batch"])]
        self.stdout.write(
            f"{connection.vendor}, {count} no-op jobs, runjobworker --burst {' '.join(worker_args)}"
        )
        self.stdout.write(f"{'processes':>9} {'wall s':>8} {'jobs/s':>8} {'db s':>8} {'jobs/s':>8}")
        for processes in process_counts:
            self.stdout.write(self._measure(count, processes, worker_args))

    def _measure(self, count: int, processes: int, worker_args: list[str]) -> str:
        # Benchmark rows only: a clean table so every run claims from the same backlog.
        Job.objects.filter(name=jobs.noop.name).delete()
        ids = [job.pk for job in jobs.noop.enqueue_many([((), {})] * count)]
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"ANALYZE {Job._meta.db_table}")
        argv = [sys.executable, str(MANAGE), "runjobworker", "--burst", "--no-scheduler"]
        started = time.perf_counter()
        workers = [
            subprocess.Popen([*argv, *worker_args], stdout=subprocess.DEVNULL)
            for _ in range(processes)
        ]
        codes = [worker.wait() for worker in workers]
        wall = time.perf_counter() - started
        if any(codes):
            raise CommandError(f"a worker exited with {codes}")
        done = Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED)
        if done.count() != count:
            raise CommandError(f"only {done.count()} of {count} jobs succeeded")
        window = done.aggregate(first=Min("started_at"), last=Max("finished_at"))
        db_seconds = (window["last"] - window["first"]).total_seconds()
        return (
            f"{processes:>9} {wall:>8.2f} {count / wall:>8.0f} {db_seconds:>8.2f} "
            f"{count / db_seconds:>8.0f}"
        )
