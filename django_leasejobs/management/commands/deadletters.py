"""``manage.py deadletters``: dead letters grouped by error; replay or discard a group.

``groups`` lists each fingerprint with its counts; ``replay --group FP`` and ``discard --group
FP`` act on one group as the admin's group actions do (each letter replayed with a single
replay's checks, refusals named); ``fingerprint`` computes the fingerprints of letters written
before they existed (or by a worker of an older release), in batches. Each takes
``--database``: the queue database whose letters it reads (``LeaseJobsCommand`` runs it there).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from django.core.management.base import CommandError

from django_leasejobs import protocol
from django_leasejobs.management import arguments
from django_leasejobs.management.base import (
    LeaseJobsCommand,
    add_database_option,
    in_batches,
)

_LABELS_PER_READ = 500


def _fingerprint(value: Any) -> str:
    if value is None:
        raise CommandError("Name the group: --group FINGERPRINT (manage.py deadletters groups).")
    try:
        return protocol.check_fingerprint(value)
    except ValueError as exc:
        raise CommandError(f"--group: {exc}") from None


def _group(fingerprint: str) -> protocol.Group:
    found = protocol.groups(fingerprint)
    if not found:
        raise CommandError(f"No dead letter has the fingerprint {fingerprint}.")
    return found[0]


class Command(LeaseJobsCommand):
    help = (
        "Dead letters grouped by error (exception class and innermost frames): list the groups, "
        "replay or discard one, or compute missing fingerprints."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        actions.required = True
        listing = actions.add_parser("groups", help="List the groups, most recently seen first.")
        listing.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        add_database_option(listing)
        for name, text in (
            ("replay", "Replay every letter of a group not replayed yet."),
            ("discard", "Delete every letter of a group with its dead job."),
        ):
            sub = actions.add_parser(name, help=text)
            sub.add_argument("--group", metavar="FINGERPRINT", help="The group's fingerprint.")
            sub.add_argument("--dry-run", action="store_true", help="Say how many; change nothing.")
            if name == "discard":
                sub.add_argument("--yes", action="store_true", help="Delete without asking.")
            add_database_option(sub)
        backfill = actions.add_parser("fingerprint", help="Compute missing fingerprints.")
        backfill.add_argument(
            "--all", action="store_true", help="Compute every letter's again (new rules)."
        )
        backfill.add_argument(
            "--batch",
            type=arguments.batch_size,
            default=500,
            metavar="N",
            help=f"Letters per transaction (1-{arguments.MAX_BATCH}, default 500).",
        )
        add_database_option(backfill)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "groups":
            self.groups(options["json"])
        elif action == "fingerprint":
            self.fingerprint(arguments.batch(options["batch"]), options["all"])
        elif action in ("replay", "discard"):
            fingerprint = _fingerprint(options.get("group"))
            group = _group(fingerprint)
            if action == "replay":
                self.replay(group, options["dry_run"])
            else:
                self.discard(group, options["dry_run"], options.get("yes", False))
        else:
            raise CommandError(f"Unknown action {action!r}: groups, replay, discard, fingerprint.")

    def groups(self, as_json: bool) -> None:
        found = protocol.groups()
        labels: dict[str, tuple[str, str]] = {}
        for start in range(0, len(found), _LABELS_PER_READ):
            labels.update(protocol.latest_errors(found[start : start + _LABELS_PER_READ]))
        rows: list[dict[str, Any]] = [
            {
                "fingerprint": g.fingerprint,
                "error": labels.get(g.fingerprint, ("", ""))[0],
                "dead_letters": g.count,
                "not_replayed": g.not_replayed,
                "first_seen": g.first_seen.isoformat(),
                "last_seen": g.last_seen.isoformat(),
                "jobs": dict(g.names),
            }
            for g in found
        ]
        if as_json:
            self.stdout.write(json.dumps(rows))
            return
        if not rows:
            self.stdout.write("No dead letters.")
            return
        self.stdout.write(
            f"{'fingerprint':<17}{'dead':>7}{'not replayed':>14}  last seen         error"
        )
        for row in rows:
            key = row["fingerprint"] or "(none yet)"
            jobs = ", ".join(f"{name} ({count})" for name, count in row["jobs"].items())
            self.stdout.write(
                f"{key:<17}{row['dead_letters']:>7}{row['not_replayed']:>14}  "
                f"{row['last_seen'][:16].replace('T', ' '):<18}{row['error']}\n"
                f"{'':<40}jobs: {jobs}"
            )

    def replay(self, group: protocol.Group, dry_run: bool) -> None:
        if dry_run:
            self.stdout.write(
                f"Would replay {group.not_replayed} of the {group.count} dead letters of group "
                f"{group.fingerprint}."
            )
            return
        result = protocol.replay_group(group.fingerprint, through_id=group.latest_id)
        self.stdout.write(
            f"Replayed {len(result.replayed)} dead letters of group {group.fingerprint}; "
            f"refused {len(result.refused)}."
        )
        for letter, job in result.replayed:
            self.stdout.write(f"  dead letter #{letter} -> job #{job}")
        for letter, why in result.refused:
            self.stderr.write(f"  refused dead letter #{letter}: {why}")

    def discard(self, group: protocol.Group, dry_run: bool, yes: bool) -> None:
        if dry_run or not yes:
            text = (
                f"Would delete the {group.count} dead letters of group {group.fingerprint} "
                "with their dead jobs."
            )
            if dry_run:
                self.stdout.write(text)
                return
            raise CommandError(f"{text} Add --yes to delete them.")
        result = protocol.discard_group(group.fingerprint, through_id=group.latest_id)
        self.stdout.write(
            f"Discarded {result.discarded} dead letters of group {group.fingerprint}; "
            f"kept {len(result.kept)}."
        )
        for letter, why in result.kept:
            self.stderr.write(f"  kept dead letter #{letter}: {why}")

    def fingerprint(self, batch: int, everything: bool) -> None:
        changed, batches = in_batches(
            lambda after: protocol.fingerprint_letters(
                after_id=after, batch=batch, everything=everything
            ),
            0,
        )
        self.stdout.write(f"Fingerprinted {changed} dead letters in {batches} batch(es).")
