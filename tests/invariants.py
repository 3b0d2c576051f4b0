"""The lease protocol's invariants, checked from the tables after a fault, and a DB-polling wait.

The invariants are the guarantees of docs/guarantees.md: no job lost, each finished exactly
once, none started early, no token run twice, stale tokens change nothing, attempts in budget.

``check_invariants`` reads only the database, so it works the same after an in-process run and
after subprocess workers were killed, paused or cut off from the database.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TypeVar

from django.db.models import F
from testapp.models import Hit

from django_leasejobs.models import FINAL, DeadLetter, Job, Status
from django_leasejobs.runtime.execution import close_old_connections

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], *, timeout: float = 60.0, every: float = 0.05, what: str = ""
) -> T:
    """Poll ``condition`` until it returns something truthy; fail after a generous timeout.

    The timeout only bounds a hang: tests assert on the condition, never on how long it took.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(every)
        close_old_connections()


def check_invariants(
    job_ids: Iterable[int] | None = None,
    *,
    final: bool = True,
    expected_count: int | None = None,
) -> list[Job]:
    """Assert the invariants below on the given jobs (default: every job); return them.

    * no acknowledged job lost: every id enqueued is still there (and ``expected_count`` of them);
    * every job ends exactly once (when ``final``): one final state, lease cleared,
      ``finished_at`` set, exactly one dead letter for a dead job and none for the others;
    * no job started before its run_at: the last claim (``started_at``) is not before ``run_at``;
    * no two overlapping valid leases: no (job, attempt) token ran twice (``Hit`` rows), a running
      job has one owner and an expiry;
    * a stale token never changed a row: recorded failures belong to earlier attempts, each once;
    * attempts within budget: ``attempt - released <= max_attempts``; snoozed claims are
      among the released ones (``snoozes <= released``).
    """
    problems: list[str] = []
    query = Job.objects.all()
    ids = None if job_ids is None else list(job_ids)
    if ids is not None:
        query = query.filter(pk__in=ids)
    rows = list(query.order_by("pk"))
    found = {job.pk for job in rows}
    if ids is not None and set(ids) - found:
        problems.append(f"jobs lost: {sorted(set(ids) - found)[:20]}")
    if expected_count is not None and len(rows) != expected_count:
        problems.append(f"expected {expected_count} jobs, found {len(rows)}")
    dead_letters = Counter(
        DeadLetter.objects.filter(job_id__in=found).values_list("job_id", flat=True)
    )
    for job in rows:
        tag = f"job {job.pk} ({job.name}, {job.status}, attempt {job.attempt})"
        if final and job.status not in FINAL:
            problems.append(f"{tag}: not finished")
        if job.status in FINAL:
            if job.lease_owner or job.lease_expires_at is not None:
                problems.append(f"{tag}: finished but still leased to {job.lease_owner!r}")
            if job.finished_at is None:
                problems.append(f"{tag}: finished without finished_at")
        if job.status == Status.RUNNING and (not job.lease_owner or job.lease_expires_at is None):
            problems.append(f"{tag}: running without an owner and a lease")
        expected_letters = 1 if job.status == Status.DEAD else 0
        if dead_letters[job.pk] != expected_letters:
            problems.append(f"{tag}: {dead_letters[job.pk]} dead letters")
        if job.attempt - job.released > job.max_attempts:
            problems.append(f"{tag}: {job.attempt - job.released} charged > {job.max_attempts}")
        if job.snoozes > job.released:
            problems.append(f"{tag}: {job.snoozes} snoozes > {job.released} released")
        failed_attempts = [entry["attempt"] for entry in job.errors]
        if len(set(failed_attempts)) != len(failed_attempts):
            problems.append(f"{tag}: a failure recorded twice for one attempt {failed_attempts}")
        if job.status == Status.SUCCEEDED and job.attempt in failed_attempts:
            problems.append(f"{tag}: succeeded by an attempt recorded as failed")
        if any(a > job.attempt for a in failed_attempts):
            problems.append(f"{tag}: failure recorded for a future attempt {failed_attempts}")
    early = query.filter(
        status__in=[Status.RUNNING, Status.SUCCEEDED], started_at__lt=F("run_at")
    ).values_list("pk", flat=True)
    if early:
        problems.append(f"jobs started before their run_at: {list(early)[:20]}")
    runs = Counter(Hit.objects.filter(job_id__in=found).values_list("job_id", "attempt"))
    twice = [token for token, count in runs.items() if count > 1]
    if twice:
        problems.append(f"(job, attempt) tokens that ran twice: {twice[:20]}")
    if problems:
        raise AssertionError("lease protocol invariants violated:\n" + "\n".join(problems[:50]))
    return rows
