"""``manage.py movejobhistory``: move finished jobs written before the job table was
partitioned (PostgreSQL) into the history partitions, in small batches, while workers run.

After migration 0026 new finishes go to the history partitions at once; rows that finished
before stay in the live partition, where claims read past their index entries and retention
deletes them row by row. This moves them: first the partitions back to the oldest one's finish
time are made, then batches of ``--batch`` rows in key order, each its own transaction with
SKIP LOCKED (``--pause`` seconds between batches leave the database to the workers). Stopped
or killed, it loses nothing: run it again and it moves what is left. Other databases keep one
table: there is nothing to move.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from django.core.management.base import CommandError

from django_leasejobs import dialects, upkeep
from django_leasejobs.management.base import LeaseJobsCommand, add_database_option, in_batches
from django_leasejobs.protocol import job_database


class Command(LeaseJobsCommand):
    help = (
        "Move finished jobs written before the job table was partitioned (PostgreSQL) into "
        "the history partitions, in batches, while workers run."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--batch", type=int, default=1000, help="Rows per transaction (default 1000)."
        )
        parser.add_argument(
            "--pause",
            type=float,
            default=0.0,
            help="Seconds to wait between batches (default 0).",
        )
        add_database_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        batch, pause = options["batch"], options["pause"]
        if batch < 1:
            raise CommandError(f"--batch must be at least 1, not {batch}.")
        if pause < 0:
            raise CommandError(f"--pause must not be negative, not {pause}.")
        if not dialects.partitioned(job_database()):
            self.stdout.write(
                "Nothing to move: this database keeps finished jobs in the job table "
                "(history partitions are PostgreSQL's)."
            )
            return
        made = upkeep.prepare_move()
        if made:
            self.stdout.write(f"Made {made} history partition(s) for the older jobs.")

        def step(after: int) -> tuple[int, int]:
            moved, last = upkeep.move_finished(batch=batch, after_id=after)
            if pause and moved:
                time.sleep(pause)
            return moved, last

        moved, batches = in_batches(step, 0)
        self.stdout.write(
            f"Moved {moved} finished job(s) into the history partitions in {batches} batch(es)."
        )
