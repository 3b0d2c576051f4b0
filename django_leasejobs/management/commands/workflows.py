"""``manage.py workflows list|show ID|cancel ID``: workflow runs from a shell.

``list`` shows the newest runs (``--status`` to keep one status), ``show`` one run's steps with
their states and jobs, ``cancel`` calls ``django_leasejobs.workflows.cancel``; nothing else. A
run that does not exist, or a finished run to cancel, is a ``CommandError`` saying so (a
non-zero exit a script notices), and changes nothing. Names and reasons come from rows anyone
who enqueues may write: the tables print their control characters escaped (``printable``), and
``--json`` escapes them as JSON does. Each takes ``--database``: the queue database of the runs
(``LeaseJobsCommand`` runs the command there).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_leasejobs import protocol, workflows
from django_leasejobs.core import row_ids
from django_leasejobs.core.durations import format_age
from django_leasejobs.db import dbtime
from django_leasejobs.management.base import LeaseJobsCommand, add_database_option, printable
from django_leasejobs.models import RunStatus, WorkflowRun
from django_leasejobs.reports import workflow_reads


def run_id(text: str) -> int:
    """A positive integer within a key column, or argparse's own error naming the bad value."""
    value = row_ids.row_id(text)
    if not value:  # None, or 0: no run has it
        raise ValueError(text)
    return value


run_id.__name__ = "run id"  # argparse says "invalid run id value: 'x'"


def progress(run: WorkflowRun) -> str:
    return f"{run.steps_finished}/{run.steps_total}"


class Command(LeaseJobsCommand):
    help = (
        "Workflow runs: list the newest, show one run's steps, or cancel a run (its steps not "
        "started are cancelled, its running ones asked to end)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        actions.required = True
        listing = actions.add_parser("list", help="The newest runs, newest first.")
        listing.add_argument("--status", choices=RunStatus.values, help="Only runs of this status.")
        listing.add_argument(
            "--limit", type=run_id, default=50, metavar="N", help="At most N runs (default 50)."
        )
        listing.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        show = actions.add_parser("show", help="One run and its steps.")
        show.add_argument("id", type=run_id, metavar="ID", help="The run's id.")
        show.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        cancel = actions.add_parser("cancel", help="Cancel a running run.")
        cancel.add_argument("id", type=run_id, metavar="ID", help="The run's id.")
        for sub in (listing, show, cancel):
            add_database_option(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "list":
            self.list(options.get("status"), _limit(options.get("limit", 50)), options["json"])
        elif action == "show":
            self.show(_get(options["id"]), options["json"])
        else:
            self.cancel(_get(options["id"]))

    def list(self, status: str | None, limit: int, as_json: bool) -> None:
        if status is not None and status not in RunStatus.values:
            raise CommandError(
                f"--status must be one of {', '.join(RunStatus.values)}, not {status!r}."
            )
        rows = WorkflowRun.objects.using(protocol.job_database()).order_by("-id")
        if status is not None:
            rows = rows.filter(status=status)
        runs = list(rows[:limit])
        if as_json:
            self.stdout.write(json.dumps([workflow_reads.run_as_dict(run) for run in runs]))
            return
        if not runs:
            self.stdout.write("No workflow runs.")
            return
        now = dbtime.db_now(protocol.job_database())
        names = {run.pk: printable(run.name) for run in runs}
        width = max(4, *map(len, names.values()))
        self.stdout.write(f"{'id':>8}  {'name':<{width}}  {'status':<10}{'steps':>12}{'age':>10}")
        for run in runs:
            age = format_age((now - run.created_at).total_seconds())
            name = names[run.pk]
            self.stdout.write(
                f"{run.pk:>8}  {name:<{width}}  {run.status:<10}{progress(run):>12}{age:>10}"
            )

    def show(self, run: WorkflowRun, as_json: bool) -> None:
        steps = workflow_reads.steps(run)
        if as_json:  # every step: the API's shape, on its last page
            found = workflow_reads.run_as_dict(run, steps)
            self.stdout.write(json.dumps({**found, "next_cursor": None}))
            return
        self.stdout.write(
            f"workflow run {run.pk} {printable(run.name) or '-'}: {run.status}, {progress(run)} "
            "steps ended "
            f"({run.steps_succeeded} succeeded, {run.steps_failed} failed, "
            f"{run.steps_cancelled} cancelled)"
        )
        names = {step.id: printable(step.name) for step in steps}
        width = max(4, *map(len, names.values())) if steps else 4
        self.stdout.write(f"{'step':<{width}}  {'status':<10}{'job':>10}  after")
        for step in steps:
            job = "-" if step.job_id is None else str(step.job_id)
            after = ", ".join(map(printable, step.parent_names)) or "-"
            reason = f"  ({printable(step.reason)})" if step.reason else ""
            self.stdout.write(
                f"{names[step.id]:<{width}}  {step.status:<10}{job:>10}  {after}{reason}"
            )

    def cancel(self, run: WorkflowRun) -> None:
        if not workflows.cancel(run.pk):
            run.refresh_from_db(fields=["status"])
            raise CommandError(
                f"Workflow run {run.pk} is {run.status}: only running runs can be cancelled; "
                "nothing changed."
            )
        run.refresh_from_db()
        if run.status == RunStatus.CANCELLED:
            self.stdout.write(f"workflow run {run.pk}: cancelled")
        else:
            self.stdout.write(
                f"workflow run {run.pk}: cancel requested (steps not started cancelled; "
                "running steps' workers asked to end them)"
            )


def _get(pk: Any) -> WorkflowRun:
    try:
        number = run_id(str(pk))
    except ValueError:
        raise CommandError(f"{pk!r} is not a workflow run id (a whole number from 1).") from None
    run = WorkflowRun.objects.using(protocol.job_database()).filter(pk=number).first()
    if run is None:
        raise CommandError(f"There is no workflow run {number}.")
    return run


def _limit(value: Any) -> int:
    try:
        return run_id(str(value))
    except ValueError:
        raise CommandError(f"--limit must be a whole number from 1, not {value!r}.") from None
