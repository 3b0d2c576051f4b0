"""The OpenAPI 3.1 document: one Python description, served at the API root and checked into
docs/api.md (``python -m django_leasejobs.api.schema docs/api.md`` rewrites the copy there;
a test fails when it is stale).

Written by hand rather than derived from the views: a dozen operations do not justify a
schema framework as a dependency, and the description is read by people as much as by tools.
"""

from __future__ import annotations

import json
import os
import re
import sys

from django.conf import ENVIRONMENT_VARIABLE
from django.conf import settings as django_settings
from django.http import HttpRequest, JsonResponse

from .schema_components import schemas
from .schema_links import linked
from .schema_parts import DATABASE, PAGING, RUN_STATUSES, STATUSES, Schema, path_id, query, ref


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
    database: bool = True,
) -> Schema:
    """One operation; every one may also answer the ``Error`` envelope (``default``), and
    takes ``database`` unless it is public or ``database`` is false (an enqueue)."""
    found: Schema = {
        "operationId": operation_id,
        "summary": summary,
        "description": f"Permissions: {permissions}.",
        "parameters": [*(parameters or []), *([DATABASE] if database and not public else [])],
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
            database=False,
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
            database=False,
        )
    },
    "/jobs/bulk/": {
        "post": operation(
            "bulkJobs",
            "Cancel, retry (replay) or delete every job a filter matches, in batches; or, with "
            "dry_run, count them",
            "view_job, and to act: cancel_job, replay_deadletter or delete_job (by the action)",
            reply(200, "BulkResult", "Counted (dry run: matched only) or done"),
            body="BulkRequest",
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
    "/jobs/{job_id}/logs/": {
        "get": operation(
            "getJobLogs",
            "What a job's attempts logged",
            "view_job",
            reply(200, "JobLogs", "The job's logs"),
            parameters=[path_id("job_id")],
        )
    },
    "/jobs/{job_id}/cancel/": {
        "post": operation(
            "cancelJob",
            "Cancel a pending or failed job; ask a running job's worker to end it",
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
    "/pauses/": {
        "get": operation(
            "listPauses",
            "What is paused, by kind then name, each with its age",
            "view_job",
            reply(200, "PauseList", "The pauses"),
            parameters=[
                query("kind", {"type": "string", "enum": ["queue", "job"]}, "Only this kind.")
            ],
        ),
        "post": operation(
            "pause",
            "Pause a queue or a job name: no worker claims its due jobs until resumed",
            "view_job and pause_queue",
            reply(201, "Pause", "Paused")
            | reply(200, "Pause", "Already paused: the pause there (nothing changed)"),
            body="PauseRequest",
        ),
    },
    "/pauses/resume/": {
        "post": operation(
            "resume",
            "Resume a paused queue or job name; 404 not_paused when it is not paused",
            "view_job and pause_queue",
            reply(200, "Pause", "Resumed: the pause lifted, age is how long it lasted"),
            body="PauseRequest",
        )
    },
    "/workflows/": {
        "get": operation(
            "listWorkflows",
            "List workflow runs, newest first",
            "view_workflowrun",
            reply(200, "WorkflowRunPage", "A page of runs"),
            parameters=[
                query("status", {"type": "string", "enum": RUN_STATUSES}, "Only this status."),
                query("name", {"type": "string"}, "Only runs of this name."),
                *PAGING,
            ],
        )
    },
    "/workflows/{run_id}/": {
        "get": operation(
            "getWorkflow",
            "A workflow run with a page of its steps, in the order they were added",
            "view_workflowrun (a step's job status: view_job too)",
            reply(200, "WorkflowRunDetail", "The run"),
            parameters=[path_id("run_id"), *PAGING],
        )
    },
    "/workflows/{run_id}/cancel/": {
        "post": operation(
            "cancelWorkflow",
            "Cancel a running run: its steps not started are cancelled, its running ones asked "
            "to end",
            "view_workflowrun and cancel_workflowrun",
            reply(200, "WorkflowRunDetail", "The run after the cancel, its first page of steps"),
            parameters=[path_id("run_id")],
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
        "paths": linked(PATHS),
        "components": {
            "schemas": schemas(),
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
    """``python -m django_leasejobs.api.schema docs/api.md``: rewrite the checked-in copy.

    The document reads settings (``LEASEJOBS_API_MAX_ATTEMPTS``): without
    ``DJANGO_SETTINGS_MODULE`` this process uses the defaults, as the checked-in copy does.
    """
    if len(argv) != 1:
        print("usage: python -m django_leasejobs.api.schema PATH/TO/api.md", file=sys.stderr)
        return 2
    if not django_settings.configured and not os.environ.get(ENVIRONMENT_VARIABLE):
        django_settings.configure()
    with open(argv[0], encoding="utf-8") as handle:
        text = handle.read()
    with open(argv[0], "w", encoding="utf-8") as handle:
        handle.write(updated(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
