"""``manage.py runjobworker``: translate options, build a ``Worker``, run it. Nothing else."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_leasejobs.conf import settings
from django_leasejobs.worker import Worker, parse_queues


class Command(BaseCommand):
    help = (
        "Run a job worker: claim due jobs, run them on a pool of threads, keep their leases "
        "alive. SIGTERM/SIGINT stops gracefully (a second signal exits at once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            default=None,
            help="Comma-separated queues to take jobs from; '*' for every queue "
            "(default: LEASEJOBS_DEFAULT_QUEUE).",
        )
        parser.add_argument("--concurrency", type=int, default=4, help="Threads running jobs (4).")
        parser.add_argument("--batch", type=int, default=None, help="Jobs per claim (concurrency).")
        parser.add_argument(
            "--lease",
            type=float,
            default=None,
            help="Lease seconds (LEASEJOBS_LEASE_SECONDS).",
        )
        parser.add_argument(
            "--heartbeat",
            type=float,
            default=None,
            help="Seconds between lease renewals, shorter than the lease "
            "(LEASEJOBS_HEARTBEAT_SECONDS).",
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=None,
            help="Idle polling interval in seconds (LEASEJOBS_POLL_SECONDS).",
        )
        parser.add_argument(
            "--burst", action="store_true", help="Run what is due now, then exit 0."
        )
        parser.add_argument("--max-jobs", type=int, default=None, help="Exit after this many jobs.")
        parser.add_argument(
            "--worker-id", default=None, help="Worker id (default: host-pid-random)."
        )
        parser.add_argument(
            "--no-scheduler",
            action="store_false",
            dest="scheduler",
            help="Do not emit cron schedule occurrences from this worker.",
        )
        parser.add_argument(
            "--grace",
            type=float,
            default=30.0,
            help="Seconds in-flight jobs get to finish after SIGTERM/SIGINT before they are "
            "released (30).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            queues = parse_queues(
                options["queues"] if options["queues"] is not None else settings.DEFAULT_QUEUE
            )
            declared = settings.QUEUES
            unknown = sorted(set(queues or ()) - set(declared)) if declared is not None else []
            if unknown:
                raise ValueError(
                    f"--queues names {', '.join(unknown)}, not in LEASEJOBS_QUEUES "
                    f"({', '.join(declared or ())}): a typo would leave this worker idle."
                )
            worker = Worker(
                queues,
                concurrency=options["concurrency"],
                batch=options["batch"],
                lease=options["lease"],
                heartbeat=options["heartbeat"],
                poll=options["poll"],
                max_jobs=options["max_jobs"],
                worker_id=options["worker_id"],
                scheduler=options["scheduler"],
                grace=options["grace"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        restore_signals = worker.install_signal_handlers()
        try:
            summary = worker.run(burst=options["burst"])
        finally:
            restore_signals()
        if options["burst"] or options["verbosity"] > 1:
            self.stdout.write(summary.as_table())
