"""``manage.py tickschedules``: a scheduler process for the acceptance tests, and nothing else.

Ticks until no enabled schedule has a due occurrence left, then prints one JSON line with what
this process emitted. ``--pause-after-emit FILE`` stops inside the first emission's transaction
(after the job INSERT, before COMMIT), writes FILE and waits there to be killed.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Schedule
from django_leasejobs.reports.occurrences import next_occurrences
from django_leasejobs.runtime import schedules


def _nothing_due() -> bool:
    now = db_now()
    for schedule in Schedule.objects.filter(enabled=True):
        after = schedule.last_occurrence_at or schedule.created_at
        upcoming = next_occurrences(schedule, 1, after=after)
        if upcoming and upcoming[0] <= now:
            return False
    return True


def _pause_after_emit(marker: Path) -> Any:
    """An execute wrapper: after the first INSERT of an occurrence's job, write its schedule
    and occurrence to ``marker`` and wait inside the transaction, until SIGKILL."""

    def pause(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if sql.startswith("INSERT INTO") and Job._meta.db_table in sql:
            emitted = (
                Job.objects.exclude(schedule=None)
                .order_by("-pk")
                .values_list("schedule_id", "occurrence_at")
                .first()
            )
            if emitted is not None and emitted[1] is not None:
                marker.write_text(json.dumps([emitted[0], emitted[1].isoformat()]))
                time.sleep(600)
        return result

    return pause


class Command(BaseCommand):
    help = "Tick the schedules until nothing is due (acceptance tests)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--pause-after-emit", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        marker = options["pause_after_emit"]
        wrapper = _pause_after_emit(Path(marker)) if marker else None
        with connection.execute_wrapper(wrapper) if wrapper else contextlib.nullcontext():
            self._tick(options)

    def _tick(self, options: dict[str, Any]) -> None:
        emitted = ticks = 0
        while True:
            ticks += 1
            done = schedules.tick(limit=options["limit"])
            emitted += done
            if not done and _nothing_due():
                break
        self.stdout.write(json.dumps({"emitted": emitted, "ticks": ticks}))
