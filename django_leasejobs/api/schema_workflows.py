"""The OpenAPI schemas of workflow runs and their steps (``api.workflows``' answers)."""

from __future__ import annotations

from .schema_parts import (
    POLICIES,
    RUN_STATUSES,
    STATUSES,
    STEP_STATES,
    TIME,
    Schema,
    nullable,
    obj,
    ref,
)

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

WORKFLOW_SCHEMAS: dict[str, Schema] = {
    "WorkflowRun": obj(WORKFLOW_RUN),
    "WorkflowRunDetail": obj(
        WORKFLOW_RUN
        | {
            "steps": {
                "type": "array",
                "items": ref("WorkflowStep"),
                "description": "A page of its steps, in the order they were added.",
            },
            "next_cursor": {
                **nullable("string"),
                "description": "Pass it as cursor for the next page of steps; null on the last.",
            },
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
                "description": "Its job's status when it has a job and the caller may view "
                "jobs (view_job), else its state.",
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
