"""The OpenAPI document's component schemas: the JSON shapes ``serialize`` writes and the
bodies the views read, field for field. ``schema`` assembles them with the operations.

Jobs, dead letters, schedules, enqueues and pauses are here; the monitoring answers are in
``schema_monitoring``, workflow runs in ``schema_workflows``, the pieces all of them are built
from in ``schema_parts``. ``SCHEMAS`` keeps them in the document's order.
"""

from __future__ import annotations

from ..core import error_history
from ..core.conf import settings
from ..core.validation import MAX_PROGRESS_MESSAGE
from .errors import CODES
from .schema_bulk import BULK_SCHEMAS
from .schema_monitoring import MONITORING_SCHEMAS
from .schema_parts import (
    ANY_JSON,
    ARGS,
    KWARGS,
    STATUSES,
    TIME,
    Schema,
    nullable,
    obj,
    page_of,
    ref,
)
from .schema_workflows import WORKFLOW_SCHEMAS

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
    "fair_key": nullable(
        "string",
        minLength=1,
        maxLength=200,
        description="Interleave with other keys' jobs of the queue (docs/fairness.md).",
    ),
    "fair_weight": nullable("integer", minimum=1, maximum=100, description="Needs fair_key."),
}

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
            "database": {
                "type": "string",
                "description": "The queue database holding the job (its alias: 'default' with "
                "one database). Ids repeat across LEASEJOBS_QUEUE_DATABASES: pass it as the "
                "database parameter to reach this job again.",
            },
            "name": {"type": "string"},
            "version": {
                "type": "integer",
                "minimum": 1,
                "description": "The handler's version the arguments are stored for "
                "(@job(version=...)); a worker upgrades older ones before the call.",
            },
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
            "fair_key": nullable("string"),
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
            "progress": {
                "oneOf": [ref("Progress"), {"type": "null"}],
                "description": "The handler's latest ctx.progress() report; null before any.",
            },
        }
    ),
    "Progress": obj(
        {
            "done": {"type": "number", "minimum": 0},
            "total": nullable("number", minimum=0, description="null: unknown."),
            "message": {"type": "string", "maxLength": MAX_PROGRESS_MESSAGE},
            "at": {
                "type": "string",
                "format": "date-time",
                "description": "When it was written, by the database's clock.",
            },
        }
    ),
    "JobLogs": obj(
        {
            "logs": {
                "type": "array",
                "items": {"oneOf": [ref("JobLogRecord"), ref("JobLogDropped")]},
                "description": "What the job's attempts logged, oldest first (LEASEJOBS_JOB_LOGS).",
            }
        }
    ),
    "JobLogRecord": obj(
        {
            "attempt": {"type": "integer", "minimum": 1},
            "level": {"type": "string"},
            "logger": {"type": "string"},
            "message": {"type": "string"},
            "at": {"type": "string", "format": "date-time", "description": "The record's time."},
        }
    ),
    "JobLogDropped": obj(
        {
            "attempt": {"type": "integer", "minimum": 1},
            "dropped": {
                "type": "integer",
                "minimum": 1,
                "description": "Records dropped here by the caps (64 KiB an attempt, 1 MiB a job).",
            },
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
}
SCHEMAS |= MONITORING_SCHEMAS | WORKFLOW_SCHEMAS | BULK_SCHEMAS
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
