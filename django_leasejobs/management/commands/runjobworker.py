"""``manage.py runjobworker``: translate options, build a ``Worker``, run it (with its metrics
server when asked). Nothing else."""

from __future__ import annotations

import contextlib
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser, OutputWrapper
from django.db import DatabaseError

from django_leasejobs import metrics
from django_leasejobs.core import validation
from django_leasejobs.core.conf import settings
from django_leasejobs.errors import ScheduleError
from django_leasejobs.management import reloading
from django_leasejobs.management.base import LeaseJobsCommand
from django_leasejobs.models.databases import probe_database, using_database
from django_leasejobs.reports import unserved
from django_leasejobs.runtime.console import Console, command_logging
from django_leasejobs.runtime.heartbeat import VERSION
from django_leasejobs.runtime.worker import Worker, parse_queues

DEFAULT_METRICS_ADDR = "127.0.0.1"
"""This machine only: a worker's counters (its queues and their traffic) reach another host
only when the operator says so (``--metrics-addr 0.0.0.0``, for a scraper that reaches a pod)."""

STUCK_EXIT_CODE = 3
"""Exit status after ``--max-stuck`` stopped the worker: restart it (1 is a forced exit, 2 a
usage error)."""


class Command(LeaseJobsCommand):
    help = (
        "Run a job worker: claim due jobs, run them on a pool of threads, keep their leases "
        "alive. SIGTERM/SIGINT stops gracefully (a second signal exits at once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            default=None,
            help="Comma-separated queues to take jobs from; '*' for every queue "
            "(default: every queue, or those of LEASEJOBS_QUEUES when it is set). "
            "'mail:10,reports:2' gives each queue its own threads (a busy queue cannot take "
            "another's), in place of --concurrency.",
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=None,
            help="Threads running sync handlers, shared by the queues (4).",
        )
        parser.add_argument(
            "--async-concurrency",
            type=int,
            default=100,
            help="async def handlers running at once on the worker's event loop (100).",
        )
        parser.add_argument(
            "--batch",
            type=int,
            default=None,
            help="Jobs per claim (concurrency, plus async concurrency when there are async "
            "handlers).",
        )
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
        self._add_lifecycle_arguments(parser)

    def _add_lifecycle_arguments(self, parser: CommandParser) -> None:
        """How the worker runs and stops, and what it exports."""
        parser.add_argument(
            "--burst", action="store_true", help="Run what is due now, then exit 0."
        )
        parser.add_argument(
            "--reload",
            action="store_true",
            help="Restart the worker when project code changes, with Django's autoreloader (as "
            "runserver does); in-flight jobs are released at once, unspent, for the new code. "
            "For development; not with --burst.",
        )
        parser.add_argument("--max-jobs", type=int, default=None, help="Exit after this many jobs.")
        parser.add_argument(
            "--database",
            default=None,
            metavar="ALIAS",
            help="The queue database to serve, an alias of DATABASES (default: the home one, "
            "LEASEJOBS_DATABASE or else default). A worker never claims across databases: "
            "with LEASEJOBS_QUEUE_DATABASES, run workers for each.",
        )
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
        parser.add_argument(
            "--max-stuck",
            type=int,
            default=None,
            help="Stop gracefully, with exit status 3, once this many handler threads are stuck "
            "(still running one heartbeat after their timeout or cancel; two hung attempts of "
            "one job are two), so a supervisor restarts the process (default: never).",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help="Export this worker's Prometheus counters on http://ADDR:PORT/metrics "
            "(needs the django-leasejobs[metrics] extra; default: not exported).",
        )
        parser.add_argument(
            "--metrics-addr",
            default=None,
            help="Address the metrics server listens on, with --metrics-port (default "
            "127.0.0.1: this machine only; 0.0.0.0 for a scraper outside, as in a pod).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        console = Console(self.stdout, options["verbosity"])
        if options["reload"] and options["burst"]:
            raise CommandError(
                "--reload runs the worker until stopped, restarting it when code changes; "
                "--burst exits once nothing is due: use one or the other."
            )
        try:
            # No --queues: every queue (a job in a queue no worker serves waits for ever,
            # silently), or the declared ones when the project lists them.
            queues = (
                parse_queues(options["queues"])
                if options["queues"] is not None
                else settings.QUEUES
            )
            if isinstance(queues, dict) and options["concurrency"] is not None:
                raise ValueError(
                    f"--queues {options['queues']} gives each queue its threads: --concurrency "
                    "would say it again. Use one or the other."
                )
            unknown = validation.undeclared_queues(queues or ())
            if unknown:
                raise ValueError(
                    f"--queues names {', '.join(unknown)}, not in LEASEJOBS_QUEUES "
                    f"({', '.join(settings.QUEUES or ())}): a typo would leave this worker idle."
                )
            metrics_port, metrics_addr = _metrics_options(
                options["metrics_port"], options["metrics_addr"]
            )
            worker = Worker(
                queues,
                concurrency=options["concurrency"],
                async_concurrency=options["async_concurrency"],
                batch=options["batch"],
                lease=options["lease"],
                heartbeat=options["heartbeat"],
                poll=options["poll"],
                max_jobs=options["max_jobs"],
                worker_id=options["worker_id"],
                scheduler=options["scheduler"],
                grace=options["grace"],
                max_stuck=options["max_stuck"],
                console=console,
                database=options["database"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        # The banner and the burst's last look read the database served, as the worker does.
        with using_database(worker.options.database), command_logging(console, self.stderr):
            if options["reload"]:
                reloading.run(
                    worker,
                    lambda: self._run(worker, console, metrics_port, metrics_addr, options),
                    self.stderr,
                )
                return
            self._run(worker, console, metrics_port, metrics_addr, options)

    def _run(
        self,
        worker: Worker,
        console: Console,
        metrics_port: int | None,
        metrics_addr: str,
        options: dict[str, Any],
    ) -> None:
        """Announce the worker, run it until it stops, say how it went."""
        console.banner(worker.options, burst=options["burst"], version=VERSION)
        if options["reload"] and options["verbosity"] >= 1:
            console.write("Restarts when project code changes: in-flight jobs are released then.")
        # Undone however the run ends, for a process that lives on after it (call_command).
        with contextlib.ExitStack() as started:
            if metrics_port is not None:
                started.enter_context(_serve_metrics(metrics_port, metrics_addr))
            started.callback(worker.install_signal_handlers())
            try:
                summary = worker.run(burst=options["burst"])
            except ScheduleError as exc:
                raise CommandError(f"LEASEJOBS_SCHEDULES: {exc}") from exc
        if options["burst"] or options["verbosity"] > 1 or worker.stuck_limit_reached:
            self.stdout.write(summary.as_table())
        if options["burst"]:
            _left_behind(console, worker.options.queues, self.stderr)
        if worker.stuck_limit_reached:
            raise CommandError(
                f"{summary.stuck} handler(s) stuck (--max-stuck {options['max_stuck']}): "
                "stopped so that a fresh process takes over.",
                returncode=STUCK_EXIT_CODE,
            )


def _left_behind(console: Console, queues: list[str] | None, stderr: OutputWrapper) -> None:
    """Name the due jobs a ``--burst`` worker left because it does not serve their queue.

    After the run, whose outcome it must not change: a database error here is a line on
    stderr, not a failed burst.
    """
    try:
        # The queue database's own rows: a replica's may still hold the jobs just run.
        left, more = unserved.left_behind(queues, using=probe_database())
    except DatabaseError as exc:
        stderr.write(f"Could not look for due jobs in other queues: {exc}".strip())
        return
    console.left_behind(left, more)


def _metrics_options(port: int | None, addr: str | None) -> tuple[int | None, str]:
    """Check ``--metrics-port``/``--metrics-addr`` before anything starts.

    Port 0 would be a random port Prometheus cannot be told about, so it is refused with the
    out-of-range ones. An address without a port would silently export nothing.
    """
    if port is None:
        if addr is not None:
            raise ValueError("--metrics-addr needs --metrics-port: nothing would be exported.")
        return None, DEFAULT_METRICS_ADDR
    if not 1 <= port <= 65535:
        raise ValueError(f"--metrics-port must be a port number from 1 to 65535, not {port}.")
    return port, addr if addr is not None else DEFAULT_METRICS_ADDR


def _serve_metrics(port: int, addr: str) -> metrics.Exporter:
    """Start the metrics server, or stop here with a CommandError before the worker starts."""
    try:
        return metrics.serve(port, addr)
    except ImproperlyConfigured as exc:  # prometheus-client is missing
        raise CommandError(f"--metrics-port: {exc}") from exc
    except OSError as exc:  # port in use, address not on this host, ...
        where = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        reason = exc.strerror or str(exc)
        raise CommandError(f"--metrics-port {port}: cannot listen on {where}: {reason}.") from exc
