"""``manage.py checkjobs``: exit 1 and say why when a queue (or the workers' stuck handlers)
passes a threshold, else exit 0; with several queue databases, in any of them (``reports.shards``).

For cron, CI and Kubernetes probes. Exit status: 0 healthy, 1 unhealthy (or the database cannot
be read), 2 a usage error (bad option, nothing to check). Thresholds come from the options, or
else from the ``LEASEJOBS_HEALTH_*`` settings (the same ones the health view uses).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from django.core.management.base import CommandError

from django_leasejobs.core import validation
from django_leasejobs.core.durations import format_age
from django_leasejobs.errors import JobValidationError
from django_leasejobs.management import arguments
from django_leasejobs.management.base import LeaseJobsCommand
from django_leasejobs.reports import health, shards, stats

UNHEALTHY = 1
USAGE = 2  # the exit status argparse gives a bad option: a broken probe is not "unhealthy"


def age_seconds(text: str) -> float:
    """Seconds, or a duration such as ``5m``."""
    return arguments.duration(text, bare_seconds=True).total_seconds()


def count(text: str) -> int:
    """A threshold count: 0 or more."""
    return arguments.whole_number(text, low=0)


def queue_names(text: str) -> list[str]:
    try:
        return [validation.check_queue(name.strip()) for name in text.split(",")]
    except JobValidationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class Command(LeaseJobsCommand):
    help = (
        "Exit 1, naming the queue and the number, when the oldest due job is older than "
        "--max-due-age, more jobs went dead in the last hour than --max-dead-per-hour, or more "
        "leases expired than --max-expired-leases, a queue has been paused longer than "
        "--paused-max, the live workers have more stuck handlers than --stuck-max, more jobs "
        "wait for a worker that knows their name than --unknown-max, or a queue "
        "holds jobs due for longer than --max-unserved-age (60 s by default) while no live "
        "worker serves it; exit 0 when healthy. A paused queue is never unhealthy for waiting. "
        "With several queue databases (LEASEJOBS_QUEUE_DATABASES) each is judged on its own "
        "numbers and each problem names its database ([jobs2] queue 'reports': ...); one that "
        "cannot be read is a problem too, and the others are still judged."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--max-due-age",
            type=age_seconds,
            metavar="S",
            help="Seconds (or a duration: 5m, 1h) the oldest due job may wait.",
        )
        parser.add_argument(
            "--max-dead-per-hour",
            type=count,
            metavar="N",
            help="Dead letters a queue may collect in the last hour.",
        )
        parser.add_argument(
            "--max-expired-leases",
            type=count,
            metavar="N",
            help="Running jobs with an expired lease a queue may have.",
        )
        parser.add_argument(
            "--paused-max",
            dest="max_paused_age",
            type=age_seconds,
            metavar="AGE",
            help="How long (seconds, or a duration: 30m, 2h) a queue may stay paused.",
        )
        parser.add_argument(
            "--stuck-max",
            dest="max_stuck",
            type=count,
            metavar="N",
            help="Stuck handlers (still running after their timeout or cancel) the live "
            "workers may have in all.",
        )
        parser.add_argument(
            "--unknown-max",
            dest="max_unknown",
            type=count,
            metavar="N",
            help="Jobs that may wait for a worker that knows their name, in all (jobs a worker "
            "deferred because it does not register their name; LEASEJOBS_HEALTH_MAX_UNKNOWN).",
        )
        parser.add_argument(
            "--max-unserved-age",
            type=age_seconds,
            metavar="S",
            help="Seconds (or a duration: 5m) a due job may wait in a queue no live worker "
            "serves (LEASEJOBS_HEALTH_MAX_UNSERVED_AGE, 60 s; set it to None to stop checking).",
        )
        parser.add_argument(
            "--queue",
            type=queue_names,
            action="append",
            metavar="Q",
            help="Check only this queue (repeat, or a,b). Default: every queue with jobs.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        thresholds = health.Thresholds.from_settings().override(
            max_due_age=_convert(options["max_due_age"], age_seconds, "--max-due-age"),
            max_dead_per_hour=_convert(options["max_dead_per_hour"], count, "--max-dead-per-hour"),
            max_expired_leases=_convert(
                options["max_expired_leases"], count, "--max-expired-leases"
            ),
            max_paused_age=_convert(options["max_paused_age"], age_seconds, "--paused-max"),
            max_stuck=_convert(options["max_stuck"], count, "--stuck-max"),
            max_unknown=_convert(options["max_unknown"], count, "--unknown-max"),
            max_unserved_age=_convert(
                options["max_unserved_age"], age_seconds, "--max-unserved-age"
            ),
        )
        if thresholds.empty:
            raise CommandError(
                "Nothing to check: give --max-due-age, --max-dead-per-hour, "
                "--max-expired-leases, --paused-max, --stuck-max, --unknown-max or "
                "--max-unserved-age (or set the LEASEJOBS_HEALTH_MAX_* settings).",
                returncode=USAGE,
            )
        queues = _queues(options["queue"])
        # A probe's verdict, on each database's primary: a lagging replica
        # (LEASEJOBS_READ_DATABASES) would still show as due the jobs already done.
        readings = shards.read_each(probe=True)
        several = len(readings) > 1
        problems = shards.judge(readings, thresholds, queues)
        errors = {reading.database: reading.error for reading in readings}
        for problem in problems:
            if problem.metric == health.UNREADABLE:
                error = errors[problem.database or readings[0].database]
                said = f"UNHEALTHY{' ' if several else ': '}{problem}: {error}"
                self.stdout.write(said.strip())
            else:
                self.stdout.write(f"UNHEALTHY {problem}")
        if problems:
            sys.exit(UNHEALTHY)
        if options["verbosity"] >= 1:
            for reading in readings:
                if reading.stats is not None:  # else it was a problem, and we are not here
                    where = f"[{reading.database}] " if several else ""
                    self.stdout.write(f"OK: {where}{_summary(reading.stats, queues)}")


def _summary(result: stats.Stats, queues: set[str] | None) -> str:
    """What was checked in one database and its numbers, all within limits."""
    checked = sorted(queues) if queues is not None else sorted(result.queues)
    summary = stats.QueueStats()
    for name in checked:
        summary.add(result.queues.get(name, stats.QueueStats()))
    scope = "every queue" if queues is None else "queue(s) " + ", ".join(checked)
    return (
        f"{scope} within limits (oldest due age {int(summary.oldest_due_age)} s, "
        f"dead last hour {summary.dead_last_hour}, "
        f"expired leases {summary.expired_leases}, stuck handlers {result.stuck}"
        f"{_unknown_note(result)}"
        f"{_paused_note(result, checked)})"
    )


def _unknown_note(result: stats.Stats) -> str:
    waiting = result.unknown_total
    return f", waiting for a worker that knows them {waiting}" if waiting else ""


def _paused_note(result: stats.Stats, checked: list[str]) -> str:
    paused = [
        f"{name} {format_age(numbers.paused_age)}"
        for name in checked
        if (numbers := result.queues.get(name)) is not None and numbers.paused_age is not None
    ]
    return f"; paused: {', '.join(paused)}" if paused else ""


def _convert(value: Any, parse: Any, option: str) -> Any:
    """Options given to call_command() as keywords skip argparse; read them the same way."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        raise CommandError(f"{option} must be 0 or more, not {value!r}.", returncode=USAGE)
    return arguments.given(value, parse, option, (int, float), returncode=USAGE)


def _queues(given: list[Any] | None) -> set[str] | None:
    if not given:
        return None
    names: set[str] = set()
    for item in given:
        names.update([item] if isinstance(item, str) else item)
    try:
        validation.check_declared_queues(names)
    except JobValidationError as exc:
        raise CommandError(str(exc), returncode=USAGE) from None
    return names
