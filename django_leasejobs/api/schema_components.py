"""The OpenAPI document's component schemas: the JSON shapes ``serialize`` writes and the
bodies the views read, field for field. ``schema`` assembles them with the operations."""

from __future__ import annotations

from typing import Any

from ..core import error_history
from ..core.conf import settings
from .errors import CODES

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(kind: str, **extra: Any) -> Schema:
    return {"type": [kind, "null"], **extra}


TIME = nullable("string", format="date-time")
ANY_JSON: Schema = {}
ARGS: Schema = {"type": "array", "description": "Positional arguments (JSON values)."}
KWARGS: Schema = {"type": "object", "description": "Keyword arguments (JSON values)."}


def obj(properties: dict[str, Schema], required: tuple[str, ...] | None = None) -> Schema:
    """An object with exactly these properties (all required unless ``required`` says)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties if required is None else required),
        "additionalProperties": False,
    }


ENQUEUE_FIELDS: dict[str, Schema] = {
    "name": {"type": "string", "description": "A job on the allow-list (LEASEJOBS_API_JOBS)."},
    "args": ARGS,
    "kwargs": KWARGS,
    "run_at": nullable("string", format="date-time", description="With a UTC offset."),
    "delay": nullable("number", minimum=0, description="Seconds from the database's now."),
    "priority": nullable("integer", minimum=-100, maximum=100),
    "queue": nullable("string", pattern=r"^[A-Za-z0-9_.:-]{1,100}$"),
    "dedupe_key": nullable("string", minLength=1, maxLength=200),
    "max_attempts": nullable("integer", minimum=1),  # its maximum is a setting: schemas()
}

QUEUES_OMITTED: Schema = {
    "type": "integer",
    "minimum": 0,
    "description": "Queues past LEASEJOBS_STATS_MAX_QUEUES left out of queues (and of the "
    "total's counts); the verdict still judges them.",
}

STATUSES = ["pending", "running", "succeeded", "failed", "dead", "cancelled"]
RUN_STATUSES = ["running", "succeeded", "failed", "cancelled"]
STEP_STATES = ["waiting", "held", "released", "succeeded", "failed", "cancelled", "skipped"]
POLICIES = ["cancel", "run", "hold", "on_failure"]
"""The workflow models' choices, written out: ``python -m django_leasejobs.api.schema`` builds
the document without settings, so without importing the models (a test compares them)."""

_CUT = "a longer one is cut in its middle, where a marker says how many bytes went"
ERROR_TEXT = {
    "type": "string",
    "maxLength": error_history.ERROR_BYTES,
    "description": f"At most {error_history.ERROR_BYTES // 1024} KiB of UTF-8; {_CUT}.",
}
ERROR_HISTORY: Schema = {
    "type": "array",
    "items": {"oneOf": [ref("AttemptError"), ref("DroppedAttempts")]},
    "description": (
        "One entry per failed attempt, oldest first. A long history keeps the first "
        f"{error_history.FIRST} and the last {error_history.LAST}, with one DroppedAttempts "
        "entry between them counting the others."
    ),
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

SCHEMAS: dict[str, Schema] = {
    "Error": obj(
        {
            "code": {"type": "string", "enum": sorted(CODES)},
            "message": {"type": "string"},
            "field": nullable("string"),
        }
    ),
    "Job": obj(
        {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "status": {"type": "string", "enum": STATUSES},
            "queue": {"type": "string"},
            "priority": {"type": "integer"},
            "args": ARGS,
            "kwargs": KWARGS,
            "run_at": {"type": "string", "format": "date-time"},
            "attempt": {"type": "integer", "description": "Attempts charged so far."},
            "claims": {"type": "integer", "description": "The fencing token: claims so far."},
            "max_attempts": {"type": "integer"},
            "dedupe_key": nullable("string"),
            "lease_owner": nullable("string"),
            "lease_expires_at": TIME,
            "schedule_id": nullable("integer"),
            "occurrence_at": TIME,
            "created_at": {"type": "string", "format": "date-time"},
            "started_at": TIME,
            "finished_at": TIME,
            "last_error": {**ERROR_TEXT, "type": ["string", "null"]},
            "errors": ERROR_HISTORY,
            "result": ANY_JSON,
        }
    ),
    "DeadLetter": obj(
        {
            "id": {"type": "integer"},
            "job_id": {"type": "integer"},
            "name": {"type": "string"},
            "queue": {"type": "string"},
            "args": ARGS,
            "kwargs": KWARGS,
            "reason": {"type": "string"},
            "errors": ERROR_HISTORY,
            "created_at": {"type": "string", "format": "date-time"},
            "replayed_job_id": nullable("integer"),
            "replayed_at": TIME,
        }
    ),
    "Schedule": obj(
        {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "cron": {"type": "string"},
            "timezone": {"type": "string"},
            "job": {"type": "string"},
            "args": ARGS,
            "kwargs": KWARGS,
            "queue": nullable("string"),
            "priority": nullable("integer"),
            "max_attempts": nullable("integer"),
            "enabled": {"type": "boolean"},
            "misfire": {"type": "string", "enum": ["all", "latest", "skip"]},
            "last_occurrence_at": TIME,
        }
    ),
    "Occurrence": obj(
        {
            "at": {"type": "string", "format": "date-time"},
            "state": {
                "type": "string",
                "enum": ["emitted", "skipped", "pruned", "due", "upcoming"],
            },
            "job_id": nullable("integer"),
            "job_status": {"type": ["string", "null"], "enum": [*STATUSES, None]},
            "skip_reason": nullable("string"),
        }
    ),
    "AttemptError": obj(
        {
            "attempt": {"type": "integer", "description": "The claim (fencing token) that failed."},
            "worker": {"type": "string"},
            "at": {"type": "string", "format": "date-time"},
            "kind": {"type": "string", "description": "error, timeout, lease expired, ..."},
            "error": ERROR_TEXT,
            "traceback": {
                "type": "string",
                "maxLength": error_history.TRACEBACK_BYTES,
                "description": f"At most {error_history.TRACEBACK_BYTES // 1024} KiB; {_CUT}.",
            },
        }
    ),
    "DroppedAttempts": obj(
        {
            error_history.DROPPED: {
                "type": "integer",
                "minimum": 1,
                "description": "Failed attempts between the entries around it, not kept.",
            }
        }
    ),
    "EnqueueRequest": obj(ENQUEUE_FIELDS, required=("name",)),
    "EnqueueManyRequest": obj(
        {"jobs": {"type": "array", "minItems": 1, "items": ref("EnqueueRequest")}}
    ),
    "EnqueueManyResult": obj(
        {
            "jobs": {
                "type": "array",
                "items": obj({"job": ref("Job"), "deduplicated": {"type": "boolean"}}),
            }
        }
    ),
    "PauseRequest": obj(
        {
            "kind": {"type": "string", "enum": ["queue", "job"]},
            "name": {
                "type": "string",
                "description": "A queue name, or a job's registered name (no white space).",
            },
        }
    ),
    "Pause": obj(
        {
            "kind": {"type": "string", "enum": ["queue", "job"]},
            "name": {"type": "string"},
            "paused_at": {"type": "string", "format": "date-time"},
            "paused_by": {"type": "string", "description": "The user who paused it."},
            "age": {
                "type": "number",
                "minimum": 0,
                "description": "Seconds since paused_at, at the database's time of the answer.",
            },
        }
    ),
    "PauseList": obj({"results": {"type": "array", "items": ref("Pause")}}),
    "ReplayRequest": obj({"args": ARGS, "kwargs": KWARGS}, required=()),
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
    "Stats": obj(
        {
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
    ),
    "Health": obj(
        {
            "status": {"type": "string", "enum": ["ok", "unhealthy"]},
            "problems": {"type": "array", "items": {"type": "object"}},
            "thresholds": {"type": "object"},
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
    ),
}


WORKFLOW_RUN: dict[str, Schema] = {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "status": {"type": "string", "enum": RUN_STATUSES},
    "created_at": {"type": "string", "format": "date-time"},
    "finished_at": TIME,
    "cancel_requested_at": TIME,
    "steps_total": {"type": "integer", "minimum": 0},
    "steps_finished": {
        "type": "integer",
        "minimum": 0,
        "description": "Steps ended: succeeded, failed (dead) or cancelled.",
    },
    "steps_succeeded": {"type": "integer", "minimum": 0},
    "steps_failed": {"type": "integer", "minimum": 0},
    "steps_cancelled": {"type": "integer", "minimum": 0},
}

SCHEMAS |= {
    "WorkflowRun": obj(WORKFLOW_RUN),
    "WorkflowRunDetail": obj(
        WORKFLOW_RUN
        | {
            "steps": {
                "type": "array",
                "items": ref("WorkflowStep"),
                "description": "Every step, in the order they were added.",
            }
        }
    ),
    "WorkflowStep": obj(
        {
            "id": {"type": "integer"},
            "name": {"type": "string", "description": "Unique within the run."},
            "job_name": {"type": "string"},
            "state": {"type": "string", "enum": STEP_STATES},
            "status": {
                "type": "string",
                "enum": sorted({*STATUSES, *STEP_STATES}),
                "description": "Its job's status when it has a job, else its state.",
            },
            "on_parent_failure": {"type": "string", "enum": POLICIES},
            "reason": {**nullable("string"), "description": "Why it was cancelled or held."},
            "job_id": nullable("integer"),
            "parents": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The names of the steps it runs after, in order.",
            },
        }
    ),
}


def page_of(item: str) -> Schema:
    return obj(
        {"results": {"type": "array", "items": ref(item)}, "next_cursor": nullable("string")}
    )


SCHEMAS |= {
    f"{name}Page": page_of(name) for name in ("Job", "DeadLetter", "Schedule", "WorkflowRun")
}
SCHEMAS["OccurrencePage"] = obj(
    {
        "schedule": ref("Schedule"),
        "results": {"type": "array", "items": ref("Occurrence")},
        "next_start": TIME,
    }
)


def schemas() -> dict[str, Schema]:
    """``SCHEMAS`` as the settings make them when the document is built: an enqueue's
    ``max_attempts`` is at most ``LEASEJOBS_API_MAX_ATTEMPTS``."""
    most = settings.API_MAX_ATTEMPTS
    fields = {
        **ENQUEUE_FIELDS,
        "max_attempts": nullable(
            "integer",
            minimum=1,
            maximum=most,
            description=f"At most LEASEJOBS_API_MAX_ATTEMPTS ({most} here).",
        ),
    }
    return {**SCHEMAS, "EnqueueRequest": obj(fields, required=("name",))}
