"""The base of every management command of the app: it refuses an unmigrated database.

Without the app's tables a command failed with ``no such table`` deep in its work, and the
worker retried that for ever as if the database were down. Every command now checks first and
exits at once naming ``manage.py migrate``; a database that cannot be reached is left to the
command (the worker waits for it with backoff). Beside it, what commands share: the keyset
walk of a batched step (``in_batches``) and text from rows made safe for a terminal
(``printable``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core.management.base import BaseCommand, CommandError

from django_leasejobs.db import migration_state
from django_leasejobs.protocol import job_database

Key = TypeVar("Key")


class LeaseJobsCommand(BaseCommand):
    def execute(self, *args: Any, **options: Any) -> Any:
        alias = job_database()
        try:
            missing = migration_state.unapplied(alias)
        except migration_state.Unreachable:
            missing = []  # down is not unmigrated: the command meets (or waits for) it
        if missing:
            raise CommandError(migration_state.advice(alias, missing))
        return super().execute(*args, **options)


def in_batches(step: Callable[[Key], tuple[int, Key]], start: Key) -> tuple[int, int]:
    """Call a keyset step of the protocol (``prune_finished``, ``prune_limiters``,
    ``fingerprint_letters``) from ``start`` until the key it returns is the one it was given;
    return (rows changed in all, batches)."""
    total, batches, after = 0, 0, start
    while True:
        count, last = step(after)
        if last == after:
            return total, batches
        total, batches, after = total + count, batches + 1, last


def printable(text: str) -> str:
    """``text`` from a row, for a terminal: each character that does not print (a control
    character, such as the escape that starts a sequence able to move the cursor or rewrite
    what the operator reads, a line break, a zero-width one) written as its Python escape
    (``\\x1b``, ``\\n``, ``\\u200b``); the rest, spaces and accented letters included, as is."""
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in text
    )
