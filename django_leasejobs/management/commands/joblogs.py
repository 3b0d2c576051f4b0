"""``manage.py joblogs ID``: print what a job's attempts logged (``Job.logs()``).

Translates the id, reads the job's logs and prints one line per record (a message's further
lines indented under it), or the list as JSON with ``--json``. An unknown job is an error.
``--database`` names the queue database the id is in (``LeaseJobsCommand`` runs it there).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_leasejobs import protocol
from django_leasejobs.management.arguments import job_id
from django_leasejobs.management.base import LeaseJobsCommand, add_database_option
from django_leasejobs.models import Job


def line(entry: dict[str, Any]) -> str:
    """One record as a line: attempt, time, level, logger, message."""
    if "dropped" in entry:
        return f"attempt {entry['attempt']}  ... {entry['dropped']} records dropped ..."
    message = entry["message"].replace("\n", "\n    ")
    return (
        f"attempt {entry['attempt']}  {entry['at']}  {entry['level']}  {entry['logger']}  {message}"
    )


class Command(LeaseJobsCommand):
    help = "Print what a job's attempts logged through Python's logging (LEASEJOBS_JOB_LOGS)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("id", type=job_id, metavar="ID", help="The job's id.")
        parser.add_argument("--json", action="store_true", help='Print {"logs": [...]} as JSON.')
        add_database_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        job = Job.objects.using(protocol.job_database()).filter(pk=options["id"]).first()
        if job is None:
            raise CommandError(f"There is no job #{options['id']}.")
        logs = job.logs()
        if options["json"]:
            self.stdout.write(json.dumps({"logs": logs}, indent=2))
            return
        if not logs:
            self.stdout.write(f"Job #{job.pk} has no logs.")
        for entry in logs:
            self.stdout.write(line(entry))
