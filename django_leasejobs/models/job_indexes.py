"""The job table's indexes and constraints (``Job.Meta``), each with the reads it serves.

Every index costs each write of a row it covers: most are partial where the database has
partial indexes, so that the rows a claim or a completion writes get no entry they do not need.
"""

from __future__ import annotations

from django.db import models

from ..core.validation import MAX_PRIORITY, MIN_PRIORITY
from .statuses import Status

INDEXES = [
    # The claim path: due rows of a queue in claim order. Partial where supported, so
    # finished rows (the bulk of a busy table) are not in the index at all, nor jobs
    # with limits: they have their own index, so neither kind is read past by the other.
    models.Index(
        fields=["queue", "-priority", "run_at", "id"],
        name="leasejobs_claimable",
        condition=models.Q(
            status__in=["pending", "failed"],
            concurrency_key__isnull=True,
            rate_key__isnull=True,
        ),
    ),
    models.Index(
        fields=["queue", "-priority", "run_at", "id"],
        name="leasejobs_limited",
        condition=models.Q(status__in=["pending", "failed"])
        & (models.Q(concurrency_key__isnull=False) | models.Q(rate_key__isnull=False)),
    ),
    # A limited claim counts the running jobs of its keys.
    # With status: MySQL ignores the condition, and must still find a key's running
    # jobs without reading its waiting backlog.
    models.Index(
        fields=["concurrency_key", "status"],
        name="leasejobs_running_key",
        condition=models.Q(status="running", concurrency_key__isnull=False),
    ),
    # Queue depth and the oldest due job, per queue and waiting status (stats.collect:
    # the dashboard, health view and checkjobs), without reading the claim indexes'
    # priority order: capped counts and min(run_at) read a range of this one. Partial:
    # a claim writes no entry here, an enqueue or a retry one. Not on MySQL (0014).
    models.Index(
        fields=["queue", "status", "run_at"],
        name="leasejobs_waiting",
        condition=models.Q(status__in=["pending", "failed"]),
    ),
    # Lease recovery reads only running rows by expiry.
    models.Index(
        fields=["lease_expires_at"],
        name="leasejobs_running_lease",
        condition=models.Q(status="running"),
    ),
    # Dedupe over finished states (``dedupe_states``): the holder is looked up by key.
    # Partial where supported: jobs without a key (most) have no entry.
    models.Index(
        fields=["dedupe_key"],
        name="leasejobs_dedupe_key",
        condition=models.Q(dedupe_key__isnull=False),
    ),
    # Pruning finished jobs by age. Partial where supported: a claim (pending to running)
    # then writes no entry here, a completion one.
    models.Index(
        fields=["status", "finished_at"],
        name="leasejobs_finished",
        condition=models.Q(status__in=["succeeded", "dead", "cancelled"]),
    ),
    # The admin's job list filtered or searched by name, newest first, over every
    # status (a name filter shows finished jobs too), and the names present, one probe
    # each. A plain index: each claim and completion writes an entry (0015).
    models.Index(fields=["name", "id"], name="leasejobs_name"),
    # The admin's search by an exact concurrency key over every status. Partial: jobs
    # without a key (most) have no entry. Not on MySQL (0015): there
    # ``leasejobs_running_key`` has no condition and leads with the key.
    models.Index(
        fields=["concurrency_key"],
        name="leasejobs_concurrency_key",
        condition=models.Q(concurrency_key__isnull=False),
    ),
    # Retries per minute, for the dashboard's history (runtime.samples). Partial where
    # supported: a job that never failed (most) has no entry, and a claim or completion
    # of one writes none.
    models.Index(
        fields=["retried_at"],
        name="leasejobs_retried",
        condition=models.Q(retried_at__isnull=False),
    ),
    # Jobs waiting for a worker that knows their name (protocol.wake_deferred, stats):
    # a range of deferred_until, which only a deferral or a wake-up writes, so claims
    # and completions write no entry. Partial where supported: never-deferred rows (most)
    # have none; MySQL keeps their NULLs, past the range read (0019).
    models.Index(
        fields=["deferred_until"],
        name="leasejobs_deferred",
        condition=models.Q(deferred_until__isnull=False),
    ),
    # Fair ordering's reads at enqueue (dialects/fair_lines.py): a queue's head, a key's
    # last place. Partial: no entry for jobs without a key, none written by a claim.
    # On MySQL both index virtual columns instead (0027): no partial indexes there.
    models.Index(
        fields=["queue", "priority", "run_at"],
        name="leasejobs_fair_head",
        condition=models.Q(status__in=["pending", "failed"], fair_key__isnull=False),
    ),
    models.Index(
        fields=["queue", "priority", "fair_key", "fair_at"],
        name="leasejobs_fair_key",
        condition=models.Q(status__in=["pending", "failed"], fair_at__isnull=False),
    ),
]

CONSTRAINTS = [
    models.CheckConstraint(
        condition=models.Q(status__in=[s.value for s in Status]),
        name="leasejobs_job_status_valid",
    ),
    models.CheckConstraint(
        condition=models.Q(priority__gte=MIN_PRIORITY, priority__lte=MAX_PRIORITY),
        name="leasejobs_job_priority_range",
    ),
    # A dedupe key belongs to its job name: keys of two names never meet (0016).
    models.UniqueConstraint(
        fields=["name", "live_dedupe_key"], name="leasejobs_live_dedupe_per_name"
    ),
    models.UniqueConstraint(
        fields=["schedule", "occurrence_at"], name="leasejobs_one_job_per_occurrence"
    ),
]
