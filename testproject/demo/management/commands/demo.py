"""``manage.py demo``: migrate, enqueue a mix of jobs, and show the table of jobs.

The worker runs them (``manage.py runjobworker``); this command only shows what was enqueued.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand

from demo import jobs
from django_leasejobs.models import Job


class Command(BaseCommand):
    help = "Set up the demo database, enqueue a mix of jobs and list them."

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", verbosity=0)
        quick = jobs.greet.enqueue_many([((name,), {}) for name in ("ada", "grace", "linus")])
        flaky = jobs.flaky_fetch.enqueue("https://example.invalid/report")
        poison = jobs.poison.enqueue({"order": 42})
        later = jobs.greet.enqueue("from the future", delay=30)
        self.stdout.write(
            f"Enqueued {len(quick)} quick jobs, a flaky one (#{flaky.pk}), a poison one "
            f"(#{poison.pk}) and a delayed one (#{later.pk}).\n"
        )
        self.stdout.write(f"{'id':>5}  {'name':<28} {'status':<10} {'attempt':>7}  run_at")
        for job in Job.objects.order_by("id"):
            self.stdout.write(
                f"{job.pk:>5}  {job.name:<28} {job.status:<10} {job.attempt:>7}  "
                f"{job.run_at:%H:%M:%S}"
            )
