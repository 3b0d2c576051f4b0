"""Storing each attempt's logs (``JobLog``), within the job's cap.

The runtime hands ended attempts' records here in one call per report or grouped flush: one
insert for all of them. A job keeps ``JOB_CAP`` bytes of logs over all its attempts: when an
attempt's records would pass it, the attempts after the first are deleted, oldest first, until
they fit, and the new attempt's records start with ``{"dropped": N}`` (N records of those
attempts), so the job's first records and its last are kept. Only a retried job's earlier
rows are read, and only their sizes unless the cap is reached.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import transaction

from .. import dialects
from ..models import JobLog
from ..protocol.base import job_database

JOB_CAP = 1024 * 1024
"""Bytes of records one job keeps over all its attempts."""


AttemptLogs = dialects.LogRow
"""One ended attempt's records, as :mod:`django_leasejobs.runtime.job_logs` kept them: the row
the dialect's ``insert_logs`` writes, so that most flushes hand theirs on as they are."""


def counted(records: list[dict[str, Any]]) -> int:
    """How many records a stored list stands for (its ``dropped`` markers counted)."""
    return sum(int(record.get("dropped", 1)) for record in records)


def store_logs(rows: list[AttemptLogs], *, cap: int | None = None) -> None:
    """Insert these attempts' logs, first making room within each job's cap (``JOB_CAP``)."""
    cap = JOB_CAP if cap is None else cap
    alias = job_database()
    doomed: list[int] = []
    dropped: dict[int, int] = defaultdict(int)
    earlier: dict[int, list[tuple[int, int]]] = defaultdict(list)
    retried = [row.job_id for row in rows if row.attempt > 1]
    if retried:
        for job_id, pk, size in (
            JobLog.objects.using(alias)
            .filter(job_id__in=retried)
            .order_by("job_id", "attempt", "id")
            .values_list("job_id", "id", "size")
        ):
            earlier[job_id].append((pk, size))
    for row in rows:
        kept = earlier[row.job_id]
        used = sum(size for _, size in kept) + row.size
        while used > cap and len(kept) > 1:
            pk, size = kept.pop(1)  # the first attempt's records stay
            doomed.append(pk)
            used -= size
    if doomed:
        for job_id, records in (
            JobLog.objects.using(alias).filter(pk__in=doomed).values_list("job_id", "records")
        ):
            dropped[job_id] += counted(records)
    objects = [
        row._replace(records=[{"dropped": dropped[row.job_id]}, *row.records])
        if dropped[row.job_id]
        else row
        for row in rows
    ]
    # Inside a grouped flush's transaction, a savepoint: an insert that fails (logged by the
    # runtime) must not undo the completions it rides with.
    with transaction.atomic(using=alias):
        if doomed:
            JobLog.objects.using(alias).filter(pk__in=doomed).delete()
        dialects.for_alias(alias).insert_logs(alias, objects)
