"""``manage.py tickschedules``: a scheduler process for the acceptance tests, and nothing else.

Ticks until no enabled schedule has a due occurrence left, then prints one JSON line with what
this process emitted. ``--pause-after-emit FILE`` stops inside the first emission's transaction
(after the job INSERT, before COMMIT), writes FILE and waits there to be killed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db.models.signals import post_save

from django_leasejobs import schedules
from django_leasejobs.lifecycle import db_now
from django_leasejobs.models import Job, Schedule


def _nothing_due() -> bool:
    now = db_now()
    for schedule in Schedule.objects.filter(enabled=True):
        after = schedule.last_occurrence_at or schedule.created_at
        upcoming = schedules.next_occurrences(schedule, 1, after=after)
        if upcoming and upcoming[0] <= now:
            return False
    return True


class Command(BaseCommand):
    help = "Tick the schedules until nothing is due (acceptance tests)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--pause-after-emit", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        marker = options["pause_after_emit"]
        if marker:

            def pause(sender: Any, instance: Job, created: bool, **kwargs: Any) -> None:
                if created and instance.schedule_id and instance.occurrence_at:
                    Path(marker).write_text(
                        json.dumps([instance.schedule_id, instance.occurrence_at.isoformat()])
                    )
                    time.sleep(600)  # inside the transaction, until SIGKILL

            post_save.connect(pause, sender=Job, weak=False)
        emitted = ticks = 0
        while True:
            ticks += 1
            done = schedules.tick(limit=options["limit"])
            emitted += done
            if not done and _nothing_due():
                break
        self.stdout.write(json.dumps({"emitted": emitted, "ticks": ticks}))
