"""Rows as the API's JSON: the shapes ``schema`` documents, field for field.

Times are ISO 8601 in UTC; ``attempt`` is the attempts charged against ``max_attempts`` (the
admin's figure), ``claims`` the fencing token itself, ``database`` the queue database that
holds the job (ids repeat across ``LEASEJOBS_QUEUE_DATABASES``: with the id, it finds the job).
"""

from __future__ import annotations

from typing import Any

from ..core.durations import iso
from ..models import DeadLetter, Job, Schedule
from ..models.databases import job_database
from ..reports import workflow_reads
from ..reports.occurrences import Occurrence


def job(row: Job, database: str | None = None) -> dict[str, Any]:
    """``database``: where an enqueue wrote ``row`` (its queue's); by default the queue
    database the view works on, not the replica a list may have read the row from."""
    return {
        "id": row.pk,
        "database": database or job_database(),
        "name": row.name,
        "version": row.version,
        "status": row.status,
        "queue": row.queue,
        "priority": row.priority,
        "args": row.args,
        "kwargs": row.kwargs,
        "run_at": iso(row.run_at),
        "attempt": row.attempts_charged,
        "claims": row.attempt,
        "max_attempts": row.max_attempts,
        "dedupe_key": row.dedupe_key,
        "fair_key": row.fair_key,
        "lease_owner": row.lease_owner or None,
        "lease_expires_at": iso(row.lease_expires_at),
        "schedule_id": row.schedule_id,
        "occurrence_at": iso(row.occurrence_at),
        "created_at": iso(row.created_at),
        "started_at": iso(row.started_at),
        "finished_at": iso(row.finished_at),
        "last_error": row.last_error or None,
        "errors": row.errors if isinstance(row.errors, list) else [],
        "result": row.result,
        "progress": row.progress,
    }


def dead_letter(row: DeadLetter) -> dict[str, Any]:
    return {
        "id": row.pk,
        "job_id": row.job_id,
        "name": row.name,
        "queue": row.queue,
        "args": row.args,
        "kwargs": row.kwargs,
        "reason": row.reason,
        "errors": row.errors if isinstance(row.errors, list) else [],
        "created_at": iso(row.created_at),
        "replayed_job_id": row.replayed_job_id,
        "replayed_at": iso(row.replayed_at),
    }


def schedule(row: Schedule) -> dict[str, Any]:
    return {
        "id": row.pk,
        "name": row.name,
        "cron": row.cron,
        "timezone": row.timezone,
        "job": row.job,
        "args": row.args,
        "kwargs": row.kwargs,
        "queue": row.queue or None,
        "priority": row.priority,
        "max_attempts": row.max_attempts,
        "enabled": row.enabled,
        "misfire": row.misfire,
        "last_occurrence_at": iso(row.last_occurrence_at),
    }


def occurrence(item: Occurrence) -> dict[str, Any]:
    return {
        "at": iso(item.at),
        "state": item.state,
        "job_id": item.job.pk if item.job is not None else None,
        "job_status": item.job.status if item.job is not None else None,
        "skip_reason": item.skip.reason if item.skip is not None else None,
    }


workflow_run = workflow_reads.run_as_dict
"""A run (``WorkflowRun``), or with its steps a run's page (``WorkflowRunDetail``)."""
