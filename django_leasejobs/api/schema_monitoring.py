"""The OpenAPI schemas of the monitoring answers: queue stats, live workers, the health verdict.

``Health`` carries every field of ``Stats`` (the health view's numbers are the stats'), after
its verdict: ``STATS_FIELDS`` is written once for both.
"""

from __future__ import annotations

from .schema_parts import RUN_STATUSES, TIME, Schema, obj, ref

QUEUES_OMITTED: Schema = {
    "type": "integer",
    "minimum": 0,
    "description": "Queues past LEASEJOBS_STATS_MAX_QUEUES left out of queues (and of the "
    "total's counts); the verdict still judges them.",
}

WORKERS: dict[str, Schema] = {
    "workers": {
        "type": "array",
        "items": ref("WorkerStats"),
        "description": "The table of live workers, by id.",
    },
    "stuck": {
        "type": "integer",
        "minimum": 0,
        "description": "Stuck handlers over the workers not lost.",
    },
}

UNKNOWN_JOBS: dict[str, Schema] = {
    "unknown_jobs": {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 0},
        "description": (
            "Jobs waiting for a worker that knows their name (deferred by workers that could "
            "not run it), by name."
        ),
    },
}


WORKFLOW_COUNTS: dict[str, Schema] = {
    "workflow_runs": obj({status: {"type": "integer", "minimum": 0} for status in RUN_STATUSES})
    | {
        "description": "Workflow runs by status: each exact up to 10,000, past it PostgreSQL's "
        "planner's estimate or 10,000 on other databases."
    },
}

STATS_FIELDS: dict[str, Schema] = {
    "now": TIME,
    "total": ref("QueueStats"),
    "queues": {"type": "object", "additionalProperties": ref("QueueStats")},
    "queues_omitted": QUEUES_OMITTED,
    "paused_jobs": {
        "type": "object",
        "additionalProperties": {"type": "number", "minimum": 0},
        "description": "Paused job names, each with the seconds since its pause.",
    },
    **WORKERS,
    **UNKNOWN_JOBS,
    **WORKFLOW_COUNTS,
}
"""The stats' fields, which the health verdict's answer carries after its own."""

MONITORING_SCHEMAS: dict[str, Schema] = {
    "QueueStats": obj(
        {
            name: {"type": "integer", "minimum": 0}
            for name in (
                "pending",
                "due",
                "running",
                "failed",
                "expired_leases",
                "dead_last_hour",
                "dead_last_day",
            )
        }
        | {
            "oldest_due_age": {"type": "number", "minimum": 0},
            "paused_age": {
                "type": ["number", "null"],
                "minimum": 0,
                "description": "Seconds since the queue was paused; null when it is not.",
            },
            "approximate": {
                "type": "object",
                "additionalProperties": {"type": "string", "enum": ["estimate", "at least"]},
                "description": "The counts that are not exact (past 10,000 rows): the "
                "planner's estimate on PostgreSQL, a lower bound elsewhere. Empty: all exact.",
            },
        }
    ),
    "WorkerStats": obj(
        {name: {"type": "string"} for name in ("worker_id", "host", "queues", "version")}
        | {
            name: {"type": "integer", "minimum": 0}
            for name in ("pid", "concurrency", "async_concurrency", "running", "stuck")
        }
        | {
            "started_at": {"type": "string", "format": "date-time"},
            "last_seen_age": {"type": "number", "minimum": 0},
            "lost": {
                "type": "boolean",
                "description": "Not seen for its lease: the worker died or stalled.",
            },
        }
    ),
    "Stats": obj(STATS_FIELDS),
    "Health": obj(
        {
            "status": {"type": "string", "enum": ["ok", "unhealthy"]},
            "problems": {"type": "array", "items": {"type": "object"}},
            "thresholds": {"type": "object"},
            **STATS_FIELDS,
        }
    ),
}
