"""Cancel, retry or delete every job of a filtered set, in keyed batches, with one audit entry.

The admin, the HTTP API and ``manage.py bulkjobs`` all call ``preview`` (the dry run) and
``run`` here; each state change is the layer below's, one batch at a time: a cancel is
``protocol.cancel_many``, a retry the dead letter's ``protocol.replay`` (a dead job is replayed
once, whoever asks again), a delete ``upkeep.delete_finished`` (pruning's rules).

The walk takes the set in primary-key order, ``batch`` ids at a time (a keyset walk, as
pruning does: no rescan of what was done, each batch its own short transaction), and stops at
the last id the preview counted (``through_id``), so jobs enqueued while it runs are not acted
on unseen. Each batch's rows are checked again by the statement that changes them: a job that
moved on since it was read (a pending job claimed, a dead job replayed) is changed as its new
state allows, or left and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet

from .. import protocol, upkeep
from ..errors import InvalidTransitionError, JobValidationError
from ..models import CLAIMABLE, FINAL, DeadLetter, Job, Status
from .filters import FilterError

logger = logging.getLogger("django_leasejobs")

BATCH = 1000
"""Jobs per batch (per transaction): short locks, few round trips."""
REFUSALS_KEPT = 20
"""Refused jobs a result names with their reason; the rest are counted in ``left``."""


@dataclass(frozen=True)
class Action:
    """One bulk action: who may do it, and which jobs it acts on."""

    name: str
    permission: str
    """The ``django_leasejobs`` permission a single job's action needs too."""
    statuses: tuple[str, ...]
    """The states it acts from; a filter naming none of them is refused."""
    flag: int
    """The admin log's action flag."""


ACTIONS = {
    action.name: action
    for action in (
        Action("cancel", "cancel_job", (*CLAIMABLE, Status.RUNNING), CHANGE),
        Action("retry", "replay_deadletter", (Status.DEAD,), CHANGE),
        Action("delete", "delete_job", FINAL, DELETION),
    )
}
"""cancel: pending and failed jobs now, running ones by asking their worker; retry: dead jobs,
each replayed from its dead letter as a new job; delete: finished jobs, as pruning deletes."""


def action_named(name: Any) -> Action:
    if not isinstance(name, str) or name not in ACTIONS:
        raise ValueError(f"The action must be one of {', '.join(ACTIONS)}, not {name!r}.")
    return ACTIONS[name]


def check_statuses(action: Action, parsed: dict[str, Any]) -> None:
    """Refuse a filter whose statuses the action never acts from (it would match nothing)."""
    statuses = parsed.get("status")
    if statuses and not set(statuses) & set(action.statuses):
        raise FilterError(
            f"{action.name} acts on {', '.join(action.statuses)} jobs only; the filter's status "
            f"({', '.join(statuses)}) matches none of them.",
            "status",
        )


def targets(action: Action, rows: QuerySet[Job]) -> QuerySet[Job]:
    """Those of ``rows`` the action would change now."""
    if action.name == "cancel":
        asked = Q(status=Status.RUNNING, cancel_requested_at__isnull=True)
        return rows.filter(Q(status__in=CLAIMABLE) | asked)
    if action.name == "retry":
        letters = DeadLetter.objects.filter(job=OuterRef("pk"), replayed_job__isnull=True)
        return rows.filter(Exists(letters), status=Status.DEAD)
    return upkeep.deletable(rows)


@dataclass(frozen=True)
class Preview:
    """A dry run: how many jobs the action would change now, and the last of them."""

    matched: int
    through_id: int | None


def preview(action: Action, rows: QuerySet[Job]) -> Preview:
    """Count what ``run`` would act on (one aggregate query); nothing changes."""
    found = targets(action, rows.using(protocol.job_database())).aggregate(
        matched=Count("pk"), through_id=Max("pk")
    )
    return Preview(found["matched"], found["through_id"])


@dataclass
class Result:
    """What a bulk action did."""

    action: str
    matched: int = 0
    """Jobs the walk took up: changed (in one of ``changed``'s ways) or left."""
    changed: dict[str, int] = field(default_factory=dict)
    left: int = 0
    """Jobs that changed nothing: moved on since they were read, or refused (``refusals``)."""
    refusals: list[tuple[int, str]] = field(default_factory=list)
    """The first ``REFUSALS_KEPT`` refused jobs (id, reason)."""

    def counts(self) -> str:
        changed = ", ".join(f"{verb.replace('_', ' ')} {n}" for verb, n in self.changed.items())
        return f"{changed}; left {self.left}"


def run(
    action: Action,
    rows: QuerySet[Job],
    *,
    user_id: int,
    description: str,
    source: str,
    through_id: int | None = None,
    batch: int = BATCH,
) -> Result:
    """Act on ``rows`` (the filtered set) up to ``through_id`` (by default, what matches now).

    Writes one admin log entry under ``user_id`` naming the action, ``description`` (the
    filter), ``source`` (the face) and the counts, also when the walk stops on an error (the
    batches done are committed; the error goes on to the caller).
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, not {batch!r}.")
    chosen = targets(action, rows.using(protocol.job_database())).order_by()
    if through_id is None:
        through_id = preview(action, rows).through_id
    result = Result(action.name, changed=dict.fromkeys(_CHANGES[action.name], 0))
    step = _STEPS[action.name]
    after, stopped = 0, ""
    try:
        while through_id is not None:
            ids = list(
                chosen.filter(pk__gt=after, pk__lte=through_id)
                .order_by("pk")
                .values_list("pk", flat=True)[:batch]
            )
            if not ids:
                break
            step(ids, result)
            result.matched += len(ids)
            after = ids[-1]
    except Exception as exc:
        stopped = f" Stopped by an error after job #{after}: {type(exc).__name__}."
        raise
    finally:
        _audit(action, result, user_id, description, source, stopped)
    return result


def _cancel(ids: list[int], result: Result) -> None:
    done = protocol.cancel_many(ids)
    result.changed["cancelled"] += len(done.cancelled)
    result.changed["cancel_requested"] += len(done.requested)
    result.left += len(done.left)


def _retry(ids: list[int], result: Result) -> None:
    letters = dict(
        DeadLetter.objects.using(protocol.job_database())
        .filter(job_id__in=ids, replayed_job__isnull=True)
        .values_list("job_id", "pk")
    )
    result.left += len(ids) - len(letters)  # replayed by someone else since it was read
    for job_id in ids:
        if job_id not in letters:
            continue
        try:
            protocol.replay(letters[job_id])
        except (JobValidationError, InvalidTransitionError) as exc:
            _refused(result, job_id, str(exc))
        else:
            result.changed["replayed"] += 1


def _delete(ids: list[int], result: Result) -> None:
    deleted, kept = upkeep.delete_finished(ids)
    result.changed["deleted"] += deleted
    result.left += len(kept)


def _refused(result: Result, job_id: int, why: str) -> None:
    result.left += 1
    if len(result.refusals) < REFUSALS_KEPT:
        result.refusals.append((job_id, why))


_STEPS: dict[str, Callable[[list[int], Result], None]] = {
    "cancel": _cancel,
    "retry": _retry,
    "delete": _delete,
}
_CHANGES = {
    "cancel": ("cancelled", "cancel_requested"),
    "retry": ("replayed",),
    "delete": ("deleted",),
}


def _audit(
    action: Action, result: Result, user_id: int, description: str, source: str, stopped: str
) -> None:
    """The one admin log entry of a bulk action."""
    message = (
        f"Bulk {action.name} ({source}) of the jobs matching {description}: "
        f"{result.matched} matched; {result.counts()}.{stopped}"
    )
    LogEntry.objects.create(
        user_id=user_id,
        content_type=ContentType.objects.get_for_model(Job),
        object_id=None,
        object_repr=f"Bulk {action.name}: {result.matched} job(s)"[:200],
        action_flag=action.flag,
        change_message=message,
    )
    logger.info(
        "job.bulk action=%s source=%s matched=%s %s",
        action.name,
        source,
        result.matched,
        " ".join(f"{verb}={n}" for verb, n in result.changed.items()) + f" left={result.left}",
    )
