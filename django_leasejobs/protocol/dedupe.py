"""Dedupe windows: which states hold a key, the key made of the arguments, ignore or replace.

A key belongs to its job name: a holder is looked up by ``(name, key)``, and the unique
``(name, live_dedupe_key)`` settles races, so an enqueue never meets, returns or rewrites a job
of another name that happens to hold the same key.

Guarantees, per state (racing producers included, no ``IntegrityError`` reaching them):

* **Live states** (pending, running, failed): at most one job per name and key, always. The
  unique ``(name, live_dedupe_key)`` settles a race: one INSERT wins, the others fail inside a
  savepoint and return the winner.
* **Finished states** named in ``dedupe_states`` (succeeded, dead, cancelled): at most one job
  per key among the counted states. A finished job never becomes live again, so a producer
  that finds one returns it; one that inserts checks again after its INSERT, inside the same
  savepoint, and rolls back if a counted finished job appeared meanwhile (its holder finished
  between the lookup and the INSERT). A finished job leaves the count when it is pruned.
* ``on_conflict="replace"`` (debounce) moves a *pending* holder's ``run_at`` and arguments, in
  one UPDATE guarded by ``status = 'pending'``; a holder already running, retrying or finished
  is returned unchanged (a job that started is never rewritten).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from django.db import transaction

from ..core import dedupe_keys, registry, validation
from ..db.dbtime import DbNow
from ..errors import JobValidationError
from ..models import LIVE, Job, Status
from .base import logger

OPTIONS = ("dedupe_states", "dedupe_period", "on_conflict")
RULE = "_dedupe_rule"
"""The key under which ``row_values`` hands the rule to ``insert`` (never a column)."""


class Rule(NamedTuple):
    """How a keyed enqueue meets the job already holding its key."""

    finished: tuple[str, ...]
    """Finished states that count (the live ones always do)."""
    replace: bool


def resolve(
    name: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    when: Callable[[], dt.datetime],
    *,
    dedupe_key: Any = None,
    dedupe_states: Any = None,
    dedupe_period: Any = None,
    on_conflict: Any = None,
) -> tuple[str | None, Rule | None]:
    """The call's dedupe key and rule (per-call options over the ``@job`` ones).

    A per-call ``dedupe_key`` is a literal key or True; the ``@job`` one is True or a
    template. ``when`` gives the time a window is chosen by (the job's ``run_at``).
    """
    spec = registry.lookup(name)
    states = validation.check_dedupe_states(dedupe_states)
    period = validation.check_dedupe_period(dedupe_period)
    conflict = validation.check_on_conflict(on_conflict)
    signature = spec.signature if spec is not None else None
    key: str | None
    if dedupe_key is True:
        key = dedupe_keys.derive(True, name, signature, args, kwargs)
    elif dedupe_key is not None:
        key = validation.check_dedupe_key(dedupe_key)
    elif spec is not None and spec.dedupe_key is not None:
        key = dedupe_keys.derive(spec.dedupe_key, name, signature, args, kwargs)
    else:
        key = None
    if spec is not None:
        states = states or spec.dedupe_states
        period = period or spec.dedupe_period
        conflict = conflict or spec.on_conflict
    if key is None:
        if dedupe_states is not None or dedupe_period is not None or on_conflict is not None:
            raise JobValidationError(
                "dedupe_states, dedupe_period and on_conflict need a dedupe_key."
            )
        return None, None
    if period:
        key = dedupe_keys.bucketed(key, period, when())
    key = validation.check_dedupe_key(key)
    finished = tuple(s for s in states or () if s not in LIVE)
    replace = conflict == "replace"
    return key, (Rule(finished, replace) if finished or replace else None)


class _Counted(Exception):
    """A counted finished job holds the key: the INSERT is rolled back."""

    def __init__(self, holder: Job) -> None:
        self.holder = holder


def holder(name: str, key: str, rule: Rule | None, using: str) -> Job | None:
    """The job of ``name`` holding ``key`` now: the live one, else a counted finished one."""
    jobs = Job.objects.using(using).filter(name=name)
    live = jobs.filter(live_dedupe_key=key).first()
    if live is not None or rule is None or not rule.finished:
        return live
    return jobs.filter(dedupe_key=key, status__in=rule.finished).order_by("-id").first()


def insert_checked(
    insert: Callable[[], Job], name: str, key: str, rule: Rule | None, using: str
) -> tuple[Job, bool]:
    """INSERT in a savepoint and, when finished states count, check again under it.

    Returns (job, created); raises IntegrityError when a live job took the key first.
    """
    try:
        with transaction.atomic(using=using):
            job = insert()
            if rule is not None and rule.finished:
                counted = (
                    Job.objects.using(using)
                    .filter(name=name, dedupe_key=key, status__in=rule.finished)
                    .exclude(pk=job.pk)
                    .order_by("-id")
                    .first()
                )
                if counted is not None:
                    raise _Counted(counted)
    except _Counted as found:
        return found.holder, False
    return job, True


def met(found: Job, values: dict[str, Any], rule: Rule | None, using: str) -> Job:
    """What an enqueue that found ``found`` returns: it, replaced when asked and pending."""
    if rule is None or not rule.replace:
        return found
    changed = (
        Job.objects.using(using)
        .filter(pk=found.pk, status=Status.PENDING)
        .update(
            run_at=values.get("run_at", DbNow()),
            args=values["args"],
            kwargs=values["kwargs"],
        )
    )
    if not changed:  # started, retrying or finished meanwhile: never rewritten
        return found
    logger.info("job.replaced id=%s name=%s dedupe_key=%s", found.pk, found.name, found.dedupe_key)
    found.refresh_from_db(using=using)
    return found
