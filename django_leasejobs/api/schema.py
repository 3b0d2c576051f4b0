"""The OpenAPI 3.1 document: one Python description, served at the API root and checked into
docs/api.md (``python -m django_leasejobs.api.schema docs/api.md`` rewrites the copy there;
a test fails when it is stale).

Written by hand rather than derived from the views: a dozen operations do not justify a
schema framework as a dependency, and the description is read by people as much as by tools.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from django.http import HttpRequest, JsonResponse

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
    "max_attempts": nullable("integer", minimum=1, maximum=2**31 - 1),
}

STATUSES = ["pending", "running", "succeeded", "failed", "dead", "cancelled"]

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
            "last_error": nullable("string"),
            "errors": {"type": "array", "description": "Attempt history, one per failure."},
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
            "errors": {"type": "array"},
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
        | {"oldest_due_age": {"type": "number", "minimum": 0}}
    ),
    "Stats": obj(
        {
            "now": TIME,
            "total": ref("QueueStats"),
            "queues": {"type": "object", "additionalProperties": ref("QueueStats")},
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
        }
    ),
}


def page_of(item: str) -> Schema:
    return obj(
        {"results": {"type": "array", "items": ref(item)}, "next_cursor": nullable("string")}
    )


SCHEMAS |= {f"{name}Page": page_of(name) for name in ("Job", "DeadLetter", "Schedule")}
SCHEMAS["OccurrencePage"] = obj(
    {
        "schedule": ref("Schedule"),
        "results": {"type": "array", "items": ref("Occurrence")},
        "next_start": TIME,
    }
)


def query(name: str, schema: Schema, description: str, required: bool = False) -> Schema:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "schema": schema,
        "description": description,
    }


def path_id(name: str) -> Schema:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }


PAGING = [
    query("limit", {"type": "integer", "minimum": 1}, "Rows per page (LEASEJOBS_API_PAGE_SIZE)."),
    query("cursor", {"type": "string"}, "The next_cursor of the previous page."),
]


def reply(status: int, schema: str, description: str, headers: Schema | None = None) -> Schema:
    content = {"application/json": {"schema": ref(schema)}}
    return {
        str(status): {
            "description": description,
            "content": content,
            **({"headers": headers} if headers else {}),
        }
    }


def operation(
    operation_id: str,
    summary: str,
    permissions: str,
    responses: Schema,
    *,
    parameters: list[Schema] | None = None,
    body: str | None = None,
    body_required: bool = True,
    public: bool = False,
) -> Schema:
    """One operation; every one may also answer the ``Error`` envelope (``default``)."""
    found: Schema = {
        "operationId": operation_id,
        "summary": summary,
        "description": f"Permissions: {permissions}.",
        "parameters": parameters or [],
        "responses": {
            **responses,
            "default": {
                "description": "An error (see the codes in docs/api.md).",
                "content": {"application/json": {"schema": ref("Error")}},
            },
        },
    }
    if body:
        found["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": ref(body)}},
        }
    if public:
        found["security"] = []
    return found


DEDUPLICATED = {
    "LeaseJobs-Deduplicated": {
        "description": "true when the job returned already held the dedupe key.",
        "schema": {"type": "string", "enum": ["true", "false"]},
    }
}
FILTERS = [
    query("queue", {"type": "string"}, "Only this queue."),
    query("name", {"type": "string"}, "Only this job name."),
]

PATHS: dict[str, Schema] = {
    "/": {
        "get": operation(
            "openapi",
            "This document",
            "none",
            {
                "200": {
                    "description": "OpenAPI 3.1",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
            public=True,
        )
    },
    "/jobs/": {
        "get": operation(
            "listJobs",
            "List jobs, newest first",
            "view_job",
            reply(200, "JobPage", "A page of jobs"),
            parameters=[
                query("status", {"type": "string", "enum": STATUSES}, "Only this status."),
                *FILTERS,
                *PAGING,
            ],
        ),
        "post": operation(
            "enqueueJob",
            "Enqueue a job by its registered name",
            "add_job",
            reply(201, "Job", "Enqueued", DEDUPLICATED)
            | reply(200, "Job", "The live job already holding dedupe_key", DEDUPLICATED),
            body="EnqueueRequest",
        ),
    },
    "/jobs/batch/": {
        "post": operation(
            "enqueueJobs",
            "Enqueue many jobs in one transaction: all or none",
            "add_job",
            reply(201, "EnqueueManyResult", "Enqueued")
            | reply(200, "EnqueueManyResult", "Every item was a dedupe hit"),
            body="EnqueueManyRequest",
        )
    },
    "/jobs/{job_id}/": {
        "get": operation(
            "getJob",
            "A job, with its attempt history (errors)",
            "view_job",
            reply(200, "Job", "The job"),
            parameters=[path_id("job_id")],
        )
    },
    "/jobs/{job_id}/cancel/": {
        "post": operation(
            "cancelJob",
            "Cancel a pending job, or a failed one waiting for its retry",
            "view_job and cancel_job",
            reply(200, "Job", "Cancelled"),
            parameters=[path_id("job_id")],
        )
    },
    "/jobs/{job_id}/retry/": {
        "post": operation(
            "retryJob",
            "Make a failed job due now",
            "view_job and run_job_now",
            reply(200, "Job", "Due now"),
            parameters=[path_id("job_id")],
        )
    },
    "/dead-letters/": {
        "get": operation(
            "listDeadLetters",
            "List dead letters, newest first",
            "view_deadletter",
            reply(200, "DeadLetterPage", "A page of dead letters"),
            parameters=[
                *FILTERS,
                query(
                    "replayed", {"type": "string", "enum": ["true", "false"]}, "Replayed or not."
                ),
                *PAGING,
            ],
        )
    },
    "/dead-letters/{dead_letter_id}/": {
        "get": operation(
            "getDeadLetter",
            "A dead letter with its error history",
            "view_deadletter",
            reply(200, "DeadLetter", "The dead letter"),
            parameters=[path_id("dead_letter_id")],
        )
    },
    "/dead-letters/{dead_letter_id}/replay/": {
        "post": operation(
            "replayDeadLetter",
            "Make a new job from a dead letter, optionally with edited arguments",
            "view_deadletter and replay_deadletter",
            reply(201, "Job", "The new job"),
            parameters=[path_id("dead_letter_id")],
            body="ReplayRequest",
            body_required=False,
        )
    },
    "/schedules/": {
        "get": operation(
            "listSchedules",
            "List cron schedules",
            "view_schedule",
            reply(200, "SchedulePage", "A page of schedules"),
            parameters=PAGING,
        )
    },
    "/schedules/{schedule_id}/occurrences/": {
        "get": operation(
            "listOccurrences",
            "A schedule's occurrences start < t <= end, beside their jobs",
            "view_schedule and view_job",
            reply(200, "OccurrencePage", "The occurrences, oldest first"),
            parameters=[
                path_id("schedule_id"),
                query("start", {"type": "string", "format": "date-time"}, "Exclusive.", True),
                query("end", {"type": "string", "format": "date-time"}, "Inclusive.", True),
                PAGING[0],
            ],
        )
    },
    "/queues/": {
        "get": operation(
            "queueStats", "Each queue's numbers", "view_job", reply(200, "Stats", "The numbers")
        )
    },
    "/health/": {
        "get": operation(
            "health",
            "The LEASEJOBS_HEALTH_* verdict",
            "view_job",
            reply(200, "Health", "ok") | reply(503, "Health", "unhealthy"),
        )
    },
}


def document() -> Schema:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "django-leasejobs API",
            "version": "1",
            "description": "Enqueue, inspect and operate jobs over HTTP. See docs/api.md.",
        },
        "servers": [{"url": "/jobs/api"}],
        "security": [{"token": []}, {"session": []}],
        "paths": PATHS,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "token": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "manage.py jobapitoken",
                },
                "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
            },
        },
    }


def document_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(document())


def rendered() -> str:
    return json.dumps(document(), indent=2, sort_keys=False) + "\n"


BLOCK = re.compile(r"(<!-- openapi:start -->\n```json\n)(.*?)(```\n<!-- openapi:end -->)", re.S)


def updated(markdown: str) -> str:
    """``markdown`` with its OpenAPI block replaced by the current document."""
    if not BLOCK.search(markdown):
        raise ValueError("No <!-- openapi:start --> ... <!-- openapi:end --> block found.")
    return BLOCK.sub(lambda m: m.group(1) + rendered() + m.group(3), markdown)


def main(argv: list[str]) -> int:
    """``python -m django_leasejobs.api.schema docs/api.md``: rewrite the checked-in copy."""
    if len(argv) != 1:
        print("usage: python -m django_leasejobs.api.schema PATH/TO/api.md", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as handle:
        text = handle.read()
    with open(argv[0], "w", encoding="utf-8") as handle:
        handle.write(updated(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
