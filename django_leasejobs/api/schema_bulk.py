"""The OpenAPI description of ``POST jobs/bulk/``: its operation and its three schemas."""

from __future__ import annotations

from .schema_parts import STATUSES, Schema, obj, ref

TEXT: Schema = {"type": "string", "minLength": 1, "maxLength": 1000}
WHEN: Schema = {"type": "string", "format": "date-time", "description": "With a UTC offset."}

BULK_SCHEMAS: dict[str, Schema] = {
    "BulkFilter": {
        **obj(
            {
                "queue": TEXT,
                "name": {**TEXT, "description": "A job's name; its aliases' rows too."},
                "status": {
                    "oneOf": [
                        {"type": "string", "enum": STATUSES},
                        {
                            "type": "array",
                            "items": {"type": "string", "enum": STATUSES},
                            "minItems": 1,
                        },
                    ]
                },
                "created_after": WHEN,
                "created_before": WHEN,
                "finished_after": WHEN,
                "finished_before": WHEN,
                "dedupe_key": TEXT,
                "error": {**TEXT, "description": "Part of the last error's text."},
            },
            required=(),
        ),
        "minProperties": 1,
        "description": "Every key given must match (an empty filter is refused).",
    },
    "BulkRequest": obj(
        {
            "action": {"type": "string", "enum": ["cancel", "retry", "delete"]},
            "filter": ref("BulkFilter"),
            "dry_run": {"type": "boolean", "description": "Count only; change nothing."},
            "database": {
                "type": "string",
                "description": "The queue database to act in, as the database parameter "
                "(either, or both the same); default: the home one.",
            },
        },
        required=("action", "filter"),
    ),
    "BulkResult": obj(
        {
            "matched": {
                "type": "integer",
                "minimum": 0,
                "description": "Jobs the action would change (dry run) or took up.",
            },
            "changed": {
                "type": "object",
                "additionalProperties": {"type": "integer", "minimum": 0},
                "description": "Per kind of change: cancelled and cancel_requested, replayed, "
                "or deleted.",
            },
            "left": {
                "type": "integer",
                "minimum": 0,
                "description": "Jobs that changed since they were counted, or were refused.",
            },
            "refused": {
                "type": "array",
                "items": obj({"job_id": {"type": "integer"}, "reason": {"type": "string"}}),
                "description": "The first 20 refused jobs and why.",
            },
        },
        required=("matched",),
    ),
}
