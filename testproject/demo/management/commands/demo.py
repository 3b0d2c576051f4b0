"""``manage.py demo``: the whole life of a few jobs, on the local SQLite file, in seconds.

Migrates, enqueues a mix (quick jobs, a flaky one that succeeds on its third attempt, a poison one
that ends as a dead letter, a delayed one), runs an in-process worker until every one of them has
settled, prints each job's life, and says how to open the admin.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from demo import jobs
from django_leasejobs import Worker
from django_leasejobs.models import FINAL, DeadLetter, Job

SETTLE_TIMEOUT = 30.0


class Command(BaseCommand):
    help = "Migrate, enqueue a mix of jobs, run a worker until they settle, show their lives."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--delay", type=float, default=3.0, help="Seconds the delayed job waits (3)."
        )
        parser.add_argument(
            "--quiet", action="store_true", help="Do not print the worker's log lines."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["delay"] < 0 or options["delay"] > 20:
            raise CommandError("--delay must be between 0 and 20 seconds.")
        call_command("migrate", verbosity=0)
        quick = jobs.greet.enqueue_many([((name,), {}) for name in ("ada", "grace", "linus")])
        flaky = jobs.flaky_fetch.enqueue("https://example.invalid/report")
        poison = jobs.poison.enqueue({"order": 42})
        later = jobs.greet.using(delay=options["delay"]).enqueue("from the future")
        ids = [job.pk for job in (*quick, flaky, poison, later)]
        self.stdout.write(
            f"Enqueued {len(quick)} quick jobs, a flaky one (#{flaky.pk}), a poison one "
            f"(#{poison.pk}) and one delayed by {options['delay']:g} s (#{later.pk}).\n"
            "Running a worker (4 threads) until they settle; one line per state change:\n"
        )
        settled = self._run_worker(ids, quiet=options["quiet"])
        self._print_lives(ids)
        if not settled:
            self.stdout.write(f"\nSome jobs had not settled after {SETTLE_TIMEOUT:g} s.")
        self.stdout.write(
            "\nSee them, and the dead letter, in the Django admin:\n"
            "  python testproject/manage.py createsuperuser\n"
            "  python testproject/manage.py runserver\n"
            "  then open http://127.0.0.1:8000/admin/\n"
            "A real worker runs with: python testproject/manage.py runjobworker"
        )

    def _run_worker(self, ids: list[int], *, quiet: bool) -> bool:
        worker = Worker(
            None, concurrency=4, lease=10, heartbeat=2, poll=0.1, scheduler=False, grace=5
        )
        logger = logging.getLogger("django_leasejobs")
        handler = logging.StreamHandler(self.stdout)
        handler.setFormatter(logging.Formatter("  %(asctime)s.%(msecs)03d %(message)s", "%X"))
        level, handlers = logger.level, logger.handlers
        if not quiet:  # the demo's own output replaces the project's log handlers meanwhile
            logger.handlers = [handler]
            logger.setLevel(logging.INFO)

        def run() -> None:
            try:
                worker.run()
            finally:
                connections.close_all()  # this thread's connection, opened by the worker loop

        thread = threading.Thread(target=run, name="demo-worker", daemon=True)
        thread.start()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        settled = False
        try:
            while time.monotonic() < deadline:
                if Job.objects.filter(pk__in=ids, status__in=FINAL).count() == len(ids):
                    settled = True
                    break
                time.sleep(0.1)
        finally:
            worker.stop("demo over")
            thread.join(timeout=10)
            logger.handlers = handlers
            logger.setLevel(level)
        return settled

    def _print_lives(self, ids: list[int]) -> None:
        self.stdout.write(
            f"\n{'id':>4}  {'job':<22} {'status':<10} {'attempts':>8}  life (database clock)"
        )
        letters = {d.job_id: d for d in DeadLetter.objects.filter(job_id__in=ids)}
        for job in Job.objects.filter(pk__in=ids).order_by("pk"):
            waited = (job.run_at - job.created_at).total_seconds() if job.attempt <= 1 else 0
            steps = [f"waited {waited:.1f} s"] if waited >= 0.5 else []
            steps += [f"#{e['attempt']} {e['error'].splitlines()[0][:40]}" for e in job.errors]
            if job.status == "succeeded":
                steps.append(f"#{job.attempt} ok -> {job.result!r}")
            elif job.pk in letters:
                steps.append(f"dead letter #{letters[job.pk].pk} ({letters[job.pk].reason})")
            name = job.name.rsplit(".", 1)[-1]
            self.stdout.write(
                f"{job.pk:>4}  {name:<22} {job.status:<10} {job.attempt:>8}  " + " | ".join(steps)
            )
