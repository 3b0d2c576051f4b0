"""``manage.py canceljob ID [ID ...]``: cancel jobs, or ask a running job's worker to.

Translates ids and calls ``protocol.request_cancel`` for each; nothing else. Exits non-zero
when any job could not be cancelled (finished, or no such job), so a script notices.
``--database`` names the queue database the ids are in (``LeaseJobsCommand`` runs the command
there).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from django_leasejobs import protocol
from django_leasejobs.management.arguments import job_id
from django_leasejobs.management.base import LeaseJobsCommand, add_database_option

SAID = {
    protocol.Cancel.CANCELLED: "cancelled",
    protocol.Cancel.REQUESTED: "cancel requested (running: its worker will end the attempt)",
    protocol.Cancel.REFUSED: "refused (finished, or no such job)",
}


class Command(LeaseJobsCommand):
    help = (
        "Cancel jobs by id: a pending or failed job at once; a running job by asking its worker, "
        "which ends the attempt at its next heartbeat (at once on PostgreSQL)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ids", nargs="+", type=job_id, metavar="ID", help="Job ids.")
        add_database_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        refused = []
        for pk in dict.fromkeys(options["ids"]):
            outcome = protocol.request_cancel(pk)
            self.stdout.write(f"job {pk}: {SAID[outcome]}")
            if outcome is protocol.Cancel.REFUSED:
                refused.append(pk)
        if refused:
            raise CommandError(f"Not cancelled: {', '.join(map(str, refused))}.")
