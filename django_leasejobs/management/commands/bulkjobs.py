"""``manage.py bulkjobs cancel|retry|delete``: act on every job a filter matches.

Translates the options into a filter and calls :mod:`django_leasejobs.bulk`, as the admin and
the HTTP API do: ``--dry-run`` counts, ``--yes`` acts (without it the command says what it
would do and refuses, as ``deadletters discard`` does), and the admin log entry is written
under ``--by`` (a user name), or the user of the operating system when that is a user of the
project too. ``--database`` names the queue database to act in (``LeaseJobsCommand`` runs the
command there); the log entry names it.
"""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from django_leasejobs import bulk
from django_leasejobs.management import arguments
from django_leasejobs.management.base import LeaseJobsCommand, add_database_option

FILTER_OPTIONS = {
    "queue": "Only this queue.",
    "name": "Only this job name (its aliases' rows too).",
    "status": "Only these statuses (comma-separated: pending,failed).",
    "created_after": "Created after this time (ISO 8601 with an offset: 2025-01-31T12:00:00Z).",
    "created_before": "Created before this time.",
    "finished_after": "Finished after this time.",
    "finished_before": "Finished before this time.",
    "dedupe_key": "Only this dedupe key.",
    "error": "Only jobs whose last error holds this text.",
}


class Command(LeaseJobsCommand):
    help = (
        "Cancel (running jobs: ask their worker), retry (replay dead jobs once) or delete "
        "(finished jobs) every job the filter matches, in batches; one admin log entry."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=tuple(bulk.ACTIONS), help="What to do.")
        for key, text in FILTER_OPTIONS.items():
            parser.add_argument(f"--{key.replace('_', '-')}", metavar="VALUE", help=text)
        parser.add_argument("--dry-run", action="store_true", help="Count only; change nothing.")
        parser.add_argument("--yes", action="store_true", help="Act without asking.")
        parser.add_argument(
            "--by", metavar="USERNAME", help="The user the admin log records (default: yours)."
        )
        parser.add_argument(
            "--batch",
            type=arguments.batch_size,
            default=bulk.BATCH,
            metavar="N",
            help=f"Jobs per transaction (1-{arguments.MAX_BATCH}, default {bulk.BATCH}).",
        )
        add_database_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            action = bulk.action_named(options["action"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        given = {key: options.get(key) for key in FILTER_OPTIONS}
        if isinstance(given["status"], str):
            given["status"] = [part.strip() for part in given["status"].split(",")]
        try:
            parsed = bulk.parse(given)
            bulk.check_statuses(action, parsed)
        except bulk.FilterError as exc:
            option = f"--{exc.field.replace('_', '-')}: " if exc.field else ""
            raise CommandError(f"{option}{exc}") from None
        described = bulk.describe(parsed)
        if options.get("database") is not None:
            described += f" in database {options['database']}"
        rows = bulk.jobs(parsed)
        counted = bulk.preview(action, rows)
        what = f"{action.name} {counted.matched} job(s) matching {described}"
        if options["dry_run"]:
            self.stdout.write(f"Would {what}.")
            return
        if not counted.matched:
            self.stdout.write(f"No job matches {described}: nothing to {action.name}.")
            return
        if not options["yes"]:
            raise CommandError(f"Would {what}. Add --yes to {action.name} them.")
        user_id = _user_id(options.get("by"))
        result = bulk.run(
            action,
            rows,
            user_id=user_id,
            description=described,
            source="bulkjobs command",
            through_id=counted.through_id,
            batch=arguments.batch(options["batch"]),
        )
        self.stdout.write(f"Bulk {action.name}: {result.matched} matched; {result.counts()}.")
        for pk, why in result.refusals:
            self.stderr.write(f"  refused job #{pk}: {why}")


def _user_id(name: str | None) -> int:
    """The user the admin log entry is written under: ``--by``, else the OS user's name."""
    if name is None:
        try:
            name = getpass.getuser()
        except (OSError, KeyError):
            name = ""
    model = get_user_model()
    found = model._default_manager.filter(**{model.USERNAME_FIELD: name}).values_list(
        "pk", flat=True
    )
    user_id = found.first()
    if user_id is None:
        raise CommandError(
            f"No user {name!r} in this project: the admin log records each bulk action under "
            "a user; name one with --by USERNAME."
        )
    return int(user_id)
