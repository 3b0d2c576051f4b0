"""``manage.py jobstats``: queue depth, oldest due age, dead letters, the live workers and the
workflow runs by status, as a table or JSON; with several queue databases
(``LEASEJOBS_QUEUE_DATABASES``), a table under a heading per database, or JSON by database.

``--leases`` shows the lease advisor instead: each job name's runtimes, lease, heartbeat, stale
reports and a suggested lease and heartbeat (``docs/operations.md``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from django_leasejobs.core.durations import format_age
from django_leasejobs.management import arguments, leases
from django_leasejobs.management.base import LeaseJobsCommand
from django_leasejobs.models.databases import queue_databases, read_database
from django_leasejobs.reports import advisor, replica_lag, shards, stats, workflow_reads
from django_leasejobs.runtime.execution import close_old_connections

COLUMNS = (
    ("pending", "pending"),
    ("due", "due"),
    ("running", "running"),
    ("failed", "failed"),
    ("expired_leases", "expired"),
    ("dead_last_hour", "dead 1h"),
    ("dead_last_day", "dead 24h"),
)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds.") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}.")
    return value


def table(result: stats.Stats) -> str:
    """The stats as aligned text: one row per queue, then the total."""
    rows = [(name, numbers) for name, numbers in result.queues.items()]
    rows.append(("TOTAL", result.total))
    width = max(5, *(len(name) for name, _ in rows))
    header = f"{'queue':<{width}}" + "".join(f"{label:>10}" for _, label in COLUMNS)
    lines = [header + f"{'oldest due':>12}{'paused':>10}"]
    for name, numbers in rows:
        cells = "".join(f"{numbers.counted(field).text():>10}" for field, _ in COLUMNS)
        paused = "-" if numbers.paused_age is None else format_age(numbers.paused_age)
        lines.append(f"{name:<{width}}{cells}{format_age(numbers.oldest_due_age):>12}{paused:>10}")
    for job_name, age in sorted(result.paused_jobs.items()):
        lines.append(f"paused job {job_name} for {format_age(age)}")
    for job_name, waiting in result.unknown.items():
        lines.append(f"waiting for a worker that knows it: {job_name} {waiting}")
    return "\n".join(lines + workers_table(result))


def workers_table(result: stats.Stats) -> list[str]:
    """One line per worker: when it was last seen, what it holds, its stuck handlers."""
    if not result.workers:
        return ["", "workers: none seen"]
    width = max(6, *(len(w.worker_id) for w in result.workers)) + 1
    lines = [
        "",
        f"{'worker':<{width}}{'last seen':>11}{'running':>9}{'stuck':>7}{'threads':>9}"
        f"{'async':>7}  queues",
    ]
    for w in result.workers:
        seen = format_age(w.last_seen_age) + (" LOST" if w.lost else "")
        lines.append(
            f"{w.worker_id:<{width}}{seen:>12}{w.running:>9}{w.stuck:>7}{w.concurrency:>9}"
            f"{w.async_concurrency:>7}  {w.queues}"
        )
    lines.append(f"stuck handlers on live workers: {result.stuck}")
    return lines


class Command(LeaseJobsCommand):
    help = (
        "Show each queue's pending, due, running, failed and expired-lease counts, dead letters "
        "of the last hour and day, the age of the oldest due job (database time), and how long "
        "each paused queue or job name has been paused; then each worker with its last seen "
        "age, running jobs and stuck handlers, and the workflow runs by status. With several "
        "queue databases (LEASEJOBS_QUEUE_DATABASES), each database's under a heading of its "
        "own (JSON: the totals, then each database's numbers under databases)."
    )
    sleep: Callable[[float], None] = staticmethod(time.sleep)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        parser.add_argument(
            "--leases",
            action="store_true",
            help="Show each job name's runtimes, lease, heartbeat, stale reports and a "
            "suggested lease and heartbeat, with the reason (a table per queue database; JSON: "
            "each entry names its database when there are several).",
        )
        parser.add_argument(
            "--window",
            type=arguments.duration,
            default=advisor.WINDOW,
            metavar="AGE",
            help="With --leases: the runs of this last period (default 7d).",
        )
        parser.add_argument(
            "--watch",
            type=positive_seconds,
            metavar="N",
            help="Refresh every N seconds until interrupted (Ctrl-C).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        watch = arguments.given(options["watch"], positive_seconds, "--watch", float)
        if options["leases"]:
            self.show_leases(options["json"], _window(options["window"]))
            return
        if watch is None:
            self.show(options["json"], clear=False)
            return
        try:
            while True:
                self.show(options["json"], clear=not options["json"] and self.stdout.isatty())
                close_old_connections()  # a long-running command must not keep a dead link
                self.sleep(watch)
        except KeyboardInterrupt:
            return

    def show(self, as_json: bool, *, clear: bool) -> None:
        aliases = queue_databases()
        if len(aliases) == 1:
            result = stats.collect()  # on the replica of LEASEJOBS_READ_DATABASES, if set
            lag = replica_lag.read()
            if as_json:
                self.stdout.write(json.dumps(_as_dict(result, lag)))
                return
            if clear:
                self.stdout.write("\033[H\033[2J", ending="")
            self.stdout.write(_text("Jobs", result, lag))
            return
        readings = shards.read_each(probe=False)
        if as_json:
            self.stdout.write(json.dumps(_several_as_dict(readings)))
            return
        if clear:
            self.stdout.write("\033[H\033[2J", ending="")
        blocks = []
        for reading in readings:
            heading = f"Jobs in database {reading.database}"
            if reading.stats is None:
                blocks.append(f"{heading}: cannot read the jobs table: {reading.error}".strip())
                continue
            with shards.working_on(reading.database):
                blocks.append(_text(heading, reading.stats, reading.lag, read_database()))
        self.stdout.write("\n\n".join(blocks))

    def show_leases(self, as_json: bool, window: dt.timedelta) -> None:
        aliases = queue_databases()
        several = len(aliases) > 1
        found: dict[str, list[advisor.JobLeases]] = {}
        for alias in aliases:
            with shards.working_on(alias):
                found[alias] = advisor.collect(window)
        if as_json:
            self.stdout.write(
                json.dumps(
                    [
                        {**job.as_dict(), **({"database": alias} if several else {})}
                        for alias, jobs in found.items()
                        for job in jobs
                    ]
                )
            )
            return
        days = window.total_seconds() / 86400
        blocks = [
            f"Runs of the last {days:g} day(s){f' in database {alias}' if several else ''}, "
            f"by job name\n{leases.table(jobs)}"
            for alias, jobs in found.items()
        ]
        self.stdout.write("\n\n".join(blocks))


def _as_dict(
    result: stats.Stats, lag: replica_lag.ReplicaLag | None, using: str | None = None
) -> dict[str, Any]:
    """One database's JSON: its stats, its workflow runs and, read from a replica, its lag."""
    runs = workflow_reads.counts_as_dict(using)
    read_from = {} if lag is None else {"read_from": lag.as_dict()}
    return {**result.as_dict(), "workflow_runs": runs, **read_from}


def _several_as_dict(readings: list[shards.Reading]) -> dict[str, Any]:
    """Several queue databases: the totals added up, then each database's JSON by alias (home
    first), or its ``error`` when it could not be read."""
    databases: dict[str, Any] = {}
    for reading in readings:
        if reading.stats is None:
            databases[reading.database] = {"error": f"cannot read the jobs table: {reading.error}"}
            continue
        with shards.working_on(reading.database):
            databases[reading.database] = _as_dict(reading.stats, reading.lag, read_database())
    return {"total": shards.total(readings).as_dict(), "databases": databases}


def _text(
    heading: str,
    result: stats.Stats,
    lag: replica_lag.ReplicaLag | None,
    using: str | None = None,
) -> str:
    """One database's table under its heading, then its workflow runs and replica lag."""
    when = result.now.strftime("%Y-%m-%d %H:%M:%S %Z") if result.now else ""
    lines = [f"{heading} at {when} (database time)\n{table(result)}"]
    runs_line = workflow_reads.counts_line(using)
    if runs_line is not None:
        lines.append(runs_line)
    if lag is not None:
        lines.append(lag.text())
    return "\n".join(lines)


def _window(value: Any) -> dt.timedelta:
    """``--window`` as a timedelta (``call_command`` may pass the text), above zero."""
    window = arguments.given(value, arguments.duration, "--window", dt.timedelta)
    if window is None or window <= dt.timedelta(0):
        raise CommandError("--window must be longer than zero.")
    return window
