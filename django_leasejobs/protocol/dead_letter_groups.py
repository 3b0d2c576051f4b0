"""Dead letters grouped by error: the groups, and replaying or discarding a whole group.

A group is every dead letter of one fingerprint (:mod:`django_leasejobs.core.fingerprints`): an
operator fixes a bug once, then replays what it killed. A group's replay is
:func:`operator_actions.replay` per letter, with every check a single replay makes, so a
letter that can no longer run is refused and reported while the others go through. Both walks
take the group in primary-key order, in batches, and stop at the last letter the operator was
shown (``through_id``): letters that died after the confirmation page are not acted on unseen.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, Min, Q

from ..core import fingerprints
from ..db.deadlocks import retry_deadlocks
from ..errors import InvalidTransitionError, JobValidationError
from ..models import DeadLetter, Effect, Job, Status
from .base import job_database, logger
from .operator_actions import replay

_FINGERPRINT = re.compile(rf"[0-9a-f]{{{fingerprints.LENGTH}}}")


@dataclass(frozen=True)
class Group:
    """One fingerprint's dead letters, counted."""

    fingerprint: str
    """Empty for letters written before fingerprints (``deadletters fingerprint`` fills it)."""
    count: int
    not_replayed: int
    first_seen: dt.datetime
    last_seen: dt.datetime
    names: tuple[tuple[str, int], ...]
    """Job names and their letters, most letters first."""
    latest_id: int


@dataclass
class GroupReplay:
    """What a group's replay did: (letter, new job) replayed, (letter, why) refused."""

    replayed: list[tuple[int, int]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class GroupDiscard:
    """What a group's discard did: letters deleted (with their dead jobs), (letter, why) kept."""

    discarded: int = 0
    kept: list[tuple[int, str]] = field(default_factory=list)


def check_fingerprint(fingerprint: object) -> str:
    """A group's key as given by a person or a URL, or ``ValueError`` saying what one is."""
    if not isinstance(fingerprint, str) or not _FINGERPRINT.fullmatch(fingerprint):
        raise ValueError(
            f"A group is named by its fingerprint, {fingerprints.LENGTH} hex digits "
            f"(0-9, a-f) as the group list shows it, not {fingerprint!r}."
        )
    return fingerprint


def _positive(batch: object) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, not {batch!r}.")
    return batch


def groups(fingerprint: str | None = None) -> list[Group]:
    """Every group (or one), the most recently seen first.

    One aggregate query, grouped by (fingerprint, name) in the order of the index that leads
    with those columns; the per-name rows are folded into groups here, which keeps the query
    free of a per-database string aggregate.
    """
    rows = DeadLetter.objects.using(job_database())
    if fingerprint is not None:
        rows = rows.filter(fingerprint=fingerprint)
    counted = (
        rows.values("fingerprint", "name")
        .annotate(
            count=Count("pk"),
            not_replayed=Count("pk", filter=Q(replayed_job__isnull=True)),
            first_seen=Min("created_at"),
            last_seen=Max("created_at"),
            latest_id=Max("pk"),
        )
        .order_by("fingerprint", "name")
    )
    parts: dict[str, list[Any]] = {}
    for row in counted:
        parts.setdefault(row["fingerprint"], []).append(row)
    found = [
        Group(
            fingerprint=key,
            count=sum(r["count"] for r in named),
            not_replayed=sum(r["not_replayed"] for r in named),
            first_seen=min(r["first_seen"] for r in named),
            last_seen=max(r["last_seen"] for r in named),
            names=tuple(
                (r["name"], r["count"])
                for r in sorted(named, key=lambda r: (-r["count"], r["name"]))
            ),
            latest_id=max(r["latest_id"] for r in named),
        )
        for key, named in parts.items()
    ]
    return sorted(found, key=lambda g: (g.last_seen, g.latest_id), reverse=True)


def latest_errors(shown: list[Group]) -> dict[str, tuple[str, str]]:
    """Fingerprint -> (the error's label, its latest message), from each group's newest letter."""
    letters = DeadLetter.objects.using(job_database()).filter(pk__in=[g.latest_id for g in shown])
    found = {}
    for letter in letters.only("pk", "fingerprint", "errors"):
        last = letter.errors[-1] if isinstance(letter.errors, list) and letter.errors else {}
        message = str(last.get("error", "")) if isinstance(last, dict) else str(last)
        found[letter.fingerprint] = (fingerprints.of_errors(letter.errors).label, message)
    return found


def replay_group(
    fingerprint: str,
    *,
    through_id: int | None = None,
    batch: int = 100,
    on_batch: Callable[[list[tuple[int, int]]], None] | None = None,
) -> GroupReplay:
    """Replay each letter of the group not replayed yet, up to ``through_id``.

    Each letter is its own replay (one transaction each): one that is refused (its job is no
    longer registered, its dedupe key is held, the session's encoding is not UTF-8) is reported
    with the reason and the walk goes on. ``on_batch`` hears each batch's (letter, job) pairs.
    """
    check_fingerprint(fingerprint)
    _positive(batch)
    result = GroupReplay()
    pending = DeadLetter.objects.using(job_database()).filter(
        fingerprint=fingerprint, replayed_job__isnull=True
    )
    if through_id is not None:
        pending = pending.filter(pk__lte=through_id)
    after_id = 0
    while ids := list(
        pending.filter(pk__gt=after_id).order_by("pk").values_list("pk", flat=True)[:batch]
    ):
        done = []
        for letter_id in ids:
            try:
                done.append((letter_id, replay(letter_id).pk))
            except (JobValidationError, InvalidTransitionError) as exc:
                result.refused.append((letter_id, str(exc)))
        result.replayed.extend(done)
        if on_batch is not None and done:
            on_batch(done)
        after_id = ids[-1]
    logger.info(
        "dead_letters.group_replayed fingerprint=%s replayed=%s refused=%s",
        fingerprint,
        len(result.replayed),
        len(result.refused),
    )
    return result


def discard_group(
    fingerprint: str,
    *,
    through_id: int | None = None,
    batch: int = 500,
    on_batch: Callable[[list[DeadLetter]], None] | None = None,
) -> GroupDiscard:
    """Delete the group's letters up to ``through_id``, each with its dead job, as pruning does.

    ``on_batch`` hears each batch's letters inside the batch's transaction, so an audit entry
    written there commits or rolls back with the deletion.
    """
    check_fingerprint(fingerprint)
    _positive(batch)
    result = GroupDiscard()
    after_id = 0
    while True:
        discarded, kept, last_id = _discard_batch(
            fingerprint, through_id, after_id, batch, on_batch
        )
        if last_id == after_id:
            break
        result.discarded += discarded
        result.kept.extend(kept)
        after_id = last_id
    logger.info(
        "dead_letters.group_discarded fingerprint=%s discarded=%s kept=%s",
        fingerprint,
        result.discarded,
        len(result.kept),
    )
    return result


@retry_deadlocks
def _discard_batch(
    fingerprint: str,
    through_id: int | None,
    after_id: int,
    batch: int,
    on_batch: Callable[[list[DeadLetter]], None] | None,
) -> tuple[int, list[tuple[int, str]], int]:
    """One batch in one transaction: (letters deleted, (letter, why) kept, last id looked at)."""
    alias = job_database()
    with transaction.atomic(using=alias):
        rows = DeadLetter.objects.using(alias).filter(fingerprint=fingerprint, pk__gt=after_id)
        if through_id is not None:
            rows = rows.filter(pk__lte=through_id)
        letters = list(
            rows.order_by("pk").select_for_update().only("pk", "job_id", "name", "reason")[:batch]
        )
        if not letters:
            return 0, [], after_id
        kept = _replays_of_kept_letters(alias, letters)
        chosen = [letter for letter in letters if letter.pk not in kept]
        job_ids = [letter.job_id for letter in chosen]
        if on_batch is not None and chosen:
            on_batch(chosen)
        # Effects outlive their job: the key must keep stopping a later run's repeat.
        Effect.objects.using(alias).filter(job_id__in=job_ids).update(job=None)
        # Guarded on dead (final, so always so): the job's deletion takes its letter with it.
        Job.objects.using(alias).filter(pk__in=job_ids, status=Status.DEAD).delete()
        left = set(
            DeadLetter.objects.using(alias)
            .filter(pk__in=[letter.pk for letter in chosen])
            .values_list("pk", flat=True)
        )
        kept.update({pk: "its job is not dead" for pk in left})
    return len(chosen) - len(left), sorted(kept.items()), letters[-1].pk


def _replays_of_kept_letters(alias: str, letters: list[DeadLetter]) -> dict[int, str]:
    """Letters to keep: those whose job a replay of a letter that stays created.

    Deleting such a job would clear that letter's link, and it could then be replayed again
    (pruning keeps these jobs for the same reason). A letter replays into a later one, so one
    outside the batch has a smaller id: it stayed in an earlier batch, or is not in the group.
    """
    ids = {letter.pk for letter in letters}
    replayed_by = dict(
        DeadLetter.objects.using(alias)
        .filter(replayed_job_id__in=[letter.job_id for letter in letters])
        .values_list("replayed_job_id", "pk")
    )
    kept: dict[int, str] = {}
    changed = True
    while changed:
        changed = False
        for letter in letters:
            source = replayed_by.get(letter.job_id)
            if letter.pk in kept or source is None or (source in ids and source not in kept):
                continue
            kept[letter.pk] = (
                f"its job #{letter.job_id} is the replay of dead letter #{source}, which stays"
            )
            changed = True
    return kept


def fingerprint_letters(
    *, after_id: int = 0, batch: int = 500, everything: bool = False
) -> tuple[int, int]:
    """Compute one batch of fingerprints from the stored error text: (changed, last id).

    Without ``everything`` only letters with no fingerprint yet (written before fingerprints
    existed, or by a worker of an older release); with it, every letter (after a change of the
    rules). Call again with the returned id until it comes back unchanged.
    """
    _positive(batch)
    alias = job_database()
    rows = DeadLetter.objects.using(alias).filter(pk__gt=after_id)
    if not everything:
        rows = rows.filter(fingerprint="")
    with transaction.atomic(using=alias):
        letters = list(rows.order_by("pk").only("pk", "errors", "fingerprint")[:batch])
        changed = []
        for letter in letters:
            digest = fingerprints.of_errors(letter.errors).digest
            if digest != letter.fingerprint:
                letter.fingerprint = digest
                changed.append(letter)
        DeadLetter.objects.using(alias).bulk_update(changed, ["fingerprint"])
    return len(changed), letters[-1].pk if letters else after_id
