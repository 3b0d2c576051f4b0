"""``manage.py jobapitoken create USER [--expires DAYS] [--name TEXT] | revoke ID | list``.

``create`` prints the secret once: only its SHA-256 is stored, so it cannot be shown again.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from django_leasejobs.core.durations import iso
from django_leasejobs.management.arguments import whole_number
from django_leasejobs.management.base import LeaseJobsCommand
from django_leasejobs.models import ApiToken
from django_leasejobs.upkeep import api_tokens as tokens

MAX_DAYS = 36500


def days(text: str) -> int:
    return whole_number(text, 1, MAX_DAYS)


class Command(LeaseJobsCommand):
    help = "Create, revoke or list API tokens of the HTTP API (django_leasejobs.api)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Make a token acting as USER; print it once.")
        create.add_argument("user", help="The username the token acts as (its permissions apply).")
        create.add_argument(
            "--expires", type=days, metavar="DAYS", help=f"Expire after DAYS (1-{MAX_DAYS})."
        )
        create.add_argument("--name", default="", help="What the token is for.")
        revoke = actions.add_parser("revoke", help="Revoke a token by its id, for good.")
        revoke.add_argument("id", type=lambda text: whole_number(text, 1), help="The token's id.")
        actions.add_parser("list", help="List tokens (never their secrets).")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _create(self, options: dict[str, Any]) -> None:
        model = get_user_model()
        try:
            user = model._default_manager.get_by_natural_key(options["user"])
        except model.DoesNotExist:
            raise CommandError(f"No user {options['user']!r}.") from None
        if not user.is_active:
            raise CommandError(f"User {options['user']!r} is inactive; its token would not work.")
        if len(options["name"]) > 200:
            raise CommandError("--name takes at most 200 characters.")
        lifetime = dt.timedelta(days=options["expires"]) if options["expires"] else None
        token, secret = tokens.issue(user, name=options["name"], expires_in=lifetime)
        _log(user.pk, token, "Created with manage.py jobapitoken", ADDITION)
        self.stdout.write(f"Token #{token.pk} for {user}: {secret}")
        self.stdout.write("Store it now: it is not shown again (only its hash is kept).")

    def _revoke(self, options: dict[str, Any]) -> None:
        token = ApiToken.objects.filter(pk=options["id"]).first()
        if token is None:
            raise CommandError(f"No API token #{options['id']}.")
        if not tokens.revoke(token.pk):
            raise CommandError(f"API token #{token.pk} was already revoked.")
        _log(token.user_id, token, "Revoked with manage.py jobapitoken", CHANGE)
        self.stdout.write(f"Revoked API token #{token.pk} ({token.prefix}\u2026).")

    def _list(self, options: dict[str, Any]) -> None:
        rows = ApiToken.objects.select_related("user").order_by("id")
        self.stdout.write("id  prefix      user  name  expires  last used  revoked")
        for token in rows:
            self.stdout.write(
                "  ".join(
                    str(value)
                    for value in (
                        token.pk,
                        token.prefix + "\u2026",
                        token.user,
                        token.name or "-",
                        iso(token.expires_at) or "never",
                        iso(token.last_used_at) or "never",
                        iso(token.revoked_at) or "no",
                    )
                )
            )


def _log(user_id: Any, token: ApiToken, message: str, flag: int) -> None:
    """The admin log records who a token acts as; a command has no other user to name."""
    LogEntry.objects.log_actions(
        user_id=user_id,
        queryset=[token],
        action_flag=flag,
        change_message=message,
        single_object=True,
    )
