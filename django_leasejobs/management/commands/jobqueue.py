"""``manage.py jobqueue pause|resume NAME [--job]`` and ``jobqueue list``: pauses, thinly.

Each subcommand calls :mod:`django_leasejobs.protocol.pauses` once and prints what changed;
input the protocol refuses comes back as a ``CommandError`` with its message. With shards
(``LEASEJOBS_QUEUE_DATABASES``) the protocol writes a queue's pause in the database its jobs
live in (a job name's in each), where that database's workers read it; ``list`` reads the
pauses of every queue database and names the database of each.
"""

from __future__ import annotations

import argparse
import getpass
import json
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from django_leasejobs import protocol
from django_leasejobs.core.durations import format_age
from django_leasejobs.errors import JobValidationError
from django_leasejobs.management.base import LeaseJobsCommand
from django_leasejobs.models.databases import queue_databases, using_database
from django_leasejobs.protocol.pauses import Paused

ACTIONS = ("pause", "resume", "list")


class Command(LeaseJobsCommand):
    help = (
        "Pause or resume a queue (or, with --job, a job name): workers claim none of its due "
        "jobs while it is paused; running jobs finish. A queue's pause is written in the database "
        "its jobs live in (LEASEJOBS_QUEUE_DATABASES), a job name's in each. 'list' shows "
        "every pause and its age (and its database, when there are several)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=ACTIONS, help="pause, resume or list")
        parser.add_argument("name", nargs="?", help="The queue (or, with --job, the job name).")
        parser.add_argument(
            "--job", action="store_true", help="NAME is a registered job name, not a queue."
        )
        parser.add_argument(
            "--by", default=None, help="Who pauses (default: the operating system user)."
        )
        parser.add_argument("--json", action="store_true", help="list: print JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        action, name = options["action"], options["name"]
        if action not in ACTIONS:
            raise CommandError(f"Unknown action {action!r}; use {', '.join(ACTIONS)}.")
        if action == "list":
            if name is not None or options["job"]:
                raise CommandError("'jobqueue list' takes no NAME and no --job.")
            self._list(options["json"])
            return
        if not name:
            raise CommandError(f"'jobqueue {action}' needs a NAME: the queue (or --job name).")
        target = {"job": name} if options["job"] else {"queue": name}
        what = f"job {name}" if options["job"] else f"queue {name}"
        by = options["by"] if options["by"] is not None else _os_user()
        try:
            if len(queue_databases()) > 1:  # shards: say where the pause is
                kind, checked = protocol.pauses.target(**target)
                aliases = protocol.pauses.pause_databases(kind, checked)
                label = "database" if len(aliases) == 1 else "databases"
                what += f" ({label} {', '.join(aliases)})"
            if action == "pause":
                changed = protocol.pause(**target, by=by)
            else:
                changed = protocol.resume(**target, by=by)
        except (JobValidationError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from None
        if changed is None:
            state = "already paused" if action == "pause" else "not paused"
            self.stdout.write(f"{what}: {state}; nothing changed.")
        elif action == "pause":
            self.stdout.write(f"Paused {what}: workers claim none of its jobs until resumed.")
        else:
            self.stdout.write(f"Resumed {what} (paused {format_age(changed.age)}).")

    def _list(self, as_json: bool) -> None:
        try:
            aliases = queue_databases()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        pauses: list[Paused] = []
        for alias in aliases:  # each queue database's workers read its own pauses
            with using_database(alias):
                pauses.extend(protocol.paused())
        several = len(aliases) > 1
        if as_json:
            rows = [
                {**p.as_dict(), "database": p.database} if several else p.as_dict() for p in pauses
            ]
            self.stdout.write(json.dumps(rows))
            return
        if not pauses:
            self.stdout.write("Nothing is paused.")
            return
        width = max(4, *(len(p.name) for p in pauses))
        where = max(8, *(len(p.database) for p in pauses)) + 2
        head = f"{'database':<{where}}" if several else ""
        self.stdout.write(f"{head}{'kind':<6}{'name':<{width + 2}}{'paused for':>12}  by")
        for p in pauses:
            age = format_age(p.age)
            database = f"{p.database:<{where}}" if several else ""
            self.stdout.write(f"{database}{p.kind:<6}{p.name:<{width + 2}}{age:>12}  {p.paused_by}")


def _os_user() -> str:
    try:
        return f"{getpass.getuser()} (manage.py)"
    except (KeyError, OSError):  # no such user in a container: say where it came from only
        return "manage.py"
