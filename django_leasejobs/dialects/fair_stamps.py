"""Fair jobs' places in line, written into their rows just before the INSERT.

:mod:`..core.fairness` says where a key's next job goes; the database says where the key and
its queue stand (the dialect's ``_fair_lines``: one statement for every key of a call). Each row
with a fair key and no later ``run_at`` gets its place as ``fair_at`` and ``run_at``. The
dialects' ``insert`` and ``insert_many`` call this, so every new row gets its place the same
way, whichever path enqueued it (PostgreSQL's ``insert`` works it out in its own statement).
Concurrent enqueues of one key may hand out the same place: their jobs then follow each other
by id, as jobs of one ``run_at`` always have.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..core.fairness import Place
from .fair_lines import Group, Line

ReadLines = Callable[[str, Sequence[Group]], list[Line]]
"""A dialect's ``_fair_lines``."""

Places = dict[Group, tuple[Place, dt.datetime]]
"""Each key's next place and the database's clock when it was read, for one enqueue call."""

CHUNK = 500
"""Rows of a bulk enqueue stamped per read."""


def needs_place(row: dict[str, Any]) -> bool:
    """A row with a fair key and no place given."""
    return row.get("fair_key") is not None and row.get("fair_at") is None


def stamp(
    read: ReadLines, alias: str, rows: list[dict[str, Any]], places: Places | None = None
) -> None:
    """Give each row with a fair key its place in line (``places``: what earlier rows of the
    same call were given, so a key's line goes on across them)."""
    fair = [row for row in rows if needs_place(row)]
    if not fair:
        return
    places = {} if places is None else places
    groups = [group for group in dict.fromkeys(_group(row) for row in fair) if group not in places]
    lines = read(alias, groups) if groups else []
    for group, line in zip(groups, lines, strict=True):
        places[group] = (Place.first(line.now, line.head, line.last, line.at_last), line.now)
    for row in fair:
        place, now = places[_group(row)]
        run_at = row.get("run_at")
        if run_at is not None and run_at > now:
            continue  # a later time asked for: ordered by it, as a job without a key
        row["fair_at"] = row["run_at"] = place.take(row.get("fair_weight") or 1)


def stamped(
    read: ReadLines, alias: str, rows: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """``rows`` as they come, each chunk stamped (a bulk enqueue's lazy rows)."""
    places: Places = {}
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK:
            stamp(read, alias, chunk, places)
            yield from chunk
            chunk = []
    stamp(read, alias, chunk, places)
    yield from chunk


def _group(row: dict[str, Any]) -> Group:
    return Group(row["queue"], row["priority"], row["fair_key"])
