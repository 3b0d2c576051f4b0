"""The base of every management command of the app: it refuses an unmigrated database.

Without the app's tables a command failed with ``no such table`` deep in its work, and the
worker retried that for ever as if the database were down. Every command now checks first and
exits at once naming ``manage.py migrate``; a database that cannot be reached is left to the
command (the worker waits for it with backoff).

A command given ``--database ALIAS`` (those that act on jobs by id or filter, since ids repeat
across the queue databases of ``LEASEJOBS_QUEUE_DATABASES``) runs whole inside
``using_database(ALIAS)``: the alias is checked here, once for every command
(:func:`checked_database`), and the command's own code is the code of one database. Beside
it, what commands share: the keyset walk of a batched step (``in_batches``) and text from rows
made safe for a terminal (``printable``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from django_leasejobs.db import migration_state
from django_leasejobs.models.databases import queue_databases, using_database
from django_leasejobs.protocol import job_database

Key = TypeVar("Key")


class LeaseJobsCommand(BaseCommand):
    def execute(self, *args: Any, **options: Any) -> Any:
        database = options.get("database")
        if database is not None:
            database = checked_database(database)
        with using_database(database):
            refuse_unmigrated(job_database())
            return super().execute(*args, **options)


def refuse_unmigrated(alias: str) -> None:
    """A ``CommandError`` naming ``manage.py migrate`` when the app's tables are not all in
    ``alias``; an unreachable database passes (the command meets, or waits for, it)."""
    try:
        missing = migration_state.unapplied(alias)
    except migration_state.Unreachable:
        missing = []
    if missing:
        raise CommandError(migration_state.advice(alias, missing))


def add_database_option(
    parser: argparse.ArgumentParser, default: str = "the home database"
) -> None:
    """``--database ALIAS``: the queue database a command acts in (checked by ``execute``)."""
    parser.add_argument(
        "--database",
        metavar="ALIAS",
        help="The queue database to act in, when LEASEJOBS_QUEUE_DATABASES names several "
        f"(default: {default}): ids repeat across databases.",
    )


def checked_database(alias: str) -> str:
    """``alias`` when it is a queue database (the home one or a value of
    ``LEASEJOBS_QUEUE_DATABASES``); else a ``CommandError`` listing them."""
    try:
        known = queue_databases()
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from None
    if alias not in known:
        raise CommandError(
            f"--database {alias!r} is not a queue database; the queue databases are "
            f"{', '.join(map(repr, known))} (LEASEJOBS_DATABASE's and the values of "
            "LEASEJOBS_QUEUE_DATABASES)."
        )
    return alias


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
