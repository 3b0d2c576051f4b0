"""Deferral: a worker that cannot run a claimed job's name hands it back to wait for one that can.

The same goes for a row of a known name whose ``version`` is newer than the worker's handler
(enqueued by a later release): the worker never calls its older handler with those arguments.

During a rolling deploy new code enqueues jobs that old workers do not know. Such a claim is
not the job's fault, so it is not charged: like a snooze it adds one to ``released`` (the budget
is ``attempt - released``) and the next claim raises ``attempt`` again, so fencing holds. The job
waits again ``deferral_delay`` seconds (5 s doubling per deferral, capped at 5 minutes), counts
the deferral, and keeps the moment of its first one: only when ``LEASEJOBS_UNKNOWN_JOB_GRACE``
has passed since then is it dead-lettered, as ``unregistered job``.

``deferred_until`` keeps the ``run_at`` the deferral wrote. ``wake_deferred`` (a worker that
knows the names, at start and at each poll) makes due only rows of a name and version it runs
whose ``run_at`` still equals it: a job is claimed only once due, so its first deferral
happened after its own ``run_at``, and any later write of ``run_at`` (a snooze, a retry, an
operator's action) leaves the two different. Only delays that a deferral set are cut short;
no job runs before its own time.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping

from django.db.models import F, Q
from django.db.models.functions import Coalesce

from ..db.dbtime import DbNow
from ..db.deadlocks import retry_deadlocks
from ..dialects import after
from ..models import Job, Status
from .base import Failure, Outcome, fenced_outcome, job_database
from .cancels import cancel_attempt
from .failures import fail

logger = logging.getLogger("django_leasejobs")

UNREGISTERED_JOB = "unregistered job"
"""The dead letter's reason once the grace has passed (the fingerprint of earlier letters)."""
FIRST_DELAY = 5.0
"""Seconds a first deferral waits; each further one doubles it."""
MOST_DELAY = 300.0
"""The longest wait between two deferrals."""


def deferral_delay(deferrals: int) -> float:
    """Seconds the next deferral waits, given the deferrals so far: 5, 10, 20 ... up to 300."""
    return min(MOST_DELAY, FIRST_DELAY * 2 ** min(deferrals, 16))


@retry_deadlocks
def defer(
    job_id: int,
    attempt: int,
    failure: Failure,
    *,
    deferrals: int,
    grace: dt.timedelta,
    worker_id: str,
    reason: str,
) -> Outcome:
    """Hand the running job back uncharged, to wait ``deferral_delay(deferrals)`` for a worker
    that can run it; ``Outcome.RELEASED``.

    ``failure`` says why this worker cannot run it (kind ``unregistered job``, ending with its
    advice); ``reason`` is its short form for the ``job.deferred`` log line; ``deferrals`` the
    count the claimed row held (it sets the delay only). Once ``grace`` has passed since the
    first deferral the job is dead-lettered with ``failure`` instead (``Outcome.DEAD``); a job an
    operator asked to cancel ends ``cancelled``; a stale token changes nothing
    (``Outcome.STALE``).
    """
    delay = deferral_delay(deferrals)
    held = Job.objects.using(job_database()).filter(
        pk=job_id, attempt=attempt, status=Status.RUNNING
    )
    oldest = after(-grace.total_seconds())
    within_grace = Q(first_deferred_at=None) | Q(first_deferred_at__gt=oldest)
    if not grace:  # no grace at all: dead-lettered at the first claim, as before deferrals
        within_grace = Q(pk__in=[])
    changed = held.filter(within_grace, cancel_requested_at=None).update(
        status=Status.PENDING,
        run_at=after(delay),
        deferred_until=after(delay),
        released=F("released") + 1,
        deferrals=F("deferrals") + 1,
        first_deferred_at=Coalesce(F("first_deferred_at"), DbNow()),
        lease_owner="",
        lease_expires_at=None,
    )
    if changed:
        logger.warning(
            "job.deferred id=%s attempt=%s worker=%s deferrals=%s delay=%gs reason=%s",
            job_id,
            attempt,
            worker_id,
            deferrals + 1,
            delay,
            reason,
        )
        return fenced_outcome(changed, "deferred", job_id, attempt, Outcome.RELEASED)
    row = held.values("cancel_requested_at").first()
    if row is None:
        return fenced_outcome(0, "deferred", job_id, attempt, Outcome.STALE)
    if row["cancel_requested_at"] is not None:
        return cancel_attempt(job_id, attempt)
    return fail(job_id, attempt, after_grace(failure, grace), retryable=False)


def after_grace(failure: Failure, grace: dt.timedelta) -> Failure:
    """The dead letter's failure: the worker's own words and kind (``unregistered job``, or
    ``not a task`` for a ``django.tasks`` path, so its fingerprint is the one such letters
    always had), then how long it waited and what to deploy, then the advice."""
    error = failure.error
    if failure.advice and error.endswith(failure.advice):
        error = error[: -len(failure.advice)].rstrip()
    waited = (
        f" No worker that can run it claimed it within LEASEJOBS_UNKNOWN_JOB_GRACE ({grace}) "
        "of its first deferral: deploy workers whose code registers this job (or whose "
        "allow-list imports its module), then replay it."
    )
    text = f"{error}{waited} {failure.advice}".rstrip()
    return Failure(text, failure.traceback, kind=failure.kind, advice=failure.advice)


@retry_deadlocks
def wake_deferred(names: Iterable[str] | Mapping[str, int]) -> int:
    """Make due now the deferred waiting jobs of these names whose ``run_at`` is still the one a
    deferral set (one statement); the number of jobs made due.

    ``names`` maps each name to the newest version the caller runs (a worker:
    ``registry.runnable()``): a row of a newer version stays deferred, for a worker that runs
    it. A plain list of names wakes them at any version.
    """
    runnable = _by_version(names)
    if not runnable:
        return 0
    return (
        Job.objects.using(job_database())
        .filter(
            runnable,
            deferred_until__gt=DbNow(),  # a range of leasejobs_deferred
            run_at=F("deferred_until"),
            status=Status.PENDING,
        )
        .update(run_at=DbNow(), deferred_until=None)
    )


def _by_version(names: Iterable[str] | Mapping[str, int]) -> Q | None:
    """Rows of these names at a version they run: one ``name IN (...)`` per version (most jobs
    are at version 1, so mostly one term); None for no name at all."""
    if not isinstance(names, Mapping):
        wanted = sorted(set(names))
        return Q(name__in=wanted) if wanted else None
    grouped: dict[int, list[str]] = {}
    for name, version in names.items():
        grouped.setdefault(version, []).append(name)
    condition: Q | None = None
    for version, group in sorted(grouped.items()):
        term = Q(name__in=sorted(group), version__lte=version)
        condition = term if condition is None else condition | term
    return condition


def waiting_unknown(using: str | None = None, limit: int = 10_000) -> dict[str, int]:
    """Jobs waiting for a worker that knows their name, by name: the waiting rows whose
    ``run_at`` is still the one their last deferral set (a job a knowing worker ran and that
    snoozed or failed since is not counted), at most ``limit`` of them in all."""
    rows = Job.objects.using(using or job_database()).filter(
        deferred_until__isnull=False,  # a range of leasejobs_deferred
        run_at=F("deferred_until"),  # nothing moved it since its deferral
        status=Status.PENDING,
    )
    counts: dict[str, int] = {}
    for name in rows.values_list("name", flat=True).order_by()[:limit]:
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def deferred_names(limit: int = 200) -> list[str]:
    """The names of the jobs waiting for a worker that knows them (distinct, at most ``limit``).

    A worker reads them to import, where it may, the modules of those it has not registered:
    a job defined outside ``jobs.py`` registers only when its module is first imported, so
    without this its worker would not wake it (``wake_deferred`` takes registered names).
    """
    rows = Job.objects.using(job_database()).filter(
        deferred_until__gt=DbNow(),  # a range of leasejobs_deferred
        run_at=F("deferred_until"),
        status=Status.PENDING,
    )
    return list(rows.values_list("name", flat=True).order_by("name").distinct()[:limit])
