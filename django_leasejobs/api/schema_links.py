"""The OpenAPI document's links: which answer's values feed which next call.

A client generator reads them as "after enqueueing, get / cancel / retry the job by the id in
the answer"; schemathesis' stateful testing (tests/api/test_fuzz.py) follows them to chain
calls on rows that exist, where ids drawn at random only ever reach the 404 branch.
"""

from __future__ import annotations

import copy
from typing import Any

from .schema_parts import Schema

ID = "$response.body#/id"
FIRST = "$response.body#/results/0/id"
"""The first row of a page; a link from an empty page is not followed."""


def link(operation_id: str, description: str, *, body: Any = None, **parameters: str) -> Schema:
    found: Schema = {"operationId": operation_id, "description": description}
    if parameters:
        found["parameters"] = parameters
    if body is not None:
        found["requestBody"] = body
    return found


def to_job(pointer: str, *names: str) -> dict[str, Schema]:
    """Links to the job operations (``names``, or all three) for the job whose id is at
    ``pointer``, in its database (the ``database`` beside the id: ids repeat across them)."""
    where = {"job_id": pointer, "database": pointer.removesuffix("/id") + "/database"}
    every = {
        "GetJob": link("getJob", "The job, with its attempt history.", **where),
        "CancelJob": link("cancelJob", "Cancel it.", **where),
        "RetryJob": link("retryJob", "Make it due now (a failed job only).", **where),
    }
    return {name: every[name] for name in names or every}


def to_pause(kind: str, name: str, operation_id: str, description: str) -> dict[str, Schema]:
    body = {"kind": kind, "name": name}
    return {operation_id.capitalize(): link(operation_id, description, body=body)}


SAME_PAUSE = ("$response.body#/kind", "$response.body#/name")

LINKS: dict[tuple[str, str, str], dict[str, Schema]] = {
    ("/jobs/", "post", "201"): to_job(ID),
    ("/jobs/", "post", "200"): to_job(ID),
    ("/jobs/", "get", "200"): to_job(FIRST),
    ("/jobs/batch/", "post", "201"): to_job("$response.body#/jobs/0/job/id"),
    ("/jobs/batch/", "post", "200"): to_job("$response.body#/jobs/0/job/id"),
    ("/jobs/{job_id}/cancel/", "post", "200"): to_job(ID, "GetJob", "RetryJob"),
    ("/jobs/{job_id}/retry/", "post", "200"): to_job(ID, "GetJob", "CancelJob"),
    ("/dead-letters/", "get", "200"): {
        "GetDeadLetter": link("getDeadLetter", "The dead letter.", dead_letter_id=FIRST),
        "ReplayDeadLetter": link("replayDeadLetter", "Replay it.", dead_letter_id=FIRST),
    },
    ("/dead-letters/{dead_letter_id}/", "get", "200"): {
        "ReplayDeadLetter": link("replayDeadLetter", "Replay it.", dead_letter_id=ID),
    },
    ("/dead-letters/{dead_letter_id}/replay/", "post", "201"): {
        **to_job(ID),
        "GetDeadLetter": link(
            "getDeadLetter",
            "The dead letter, now naming its replay.",
            dead_letter_id="$request.path.dead_letter_id",
        ),
    },
    ("/schedules/", "get", "200"): {
        "ListOccurrences": link("listOccurrences", "Its occurrences.", schedule_id=FIRST)
    },
    ("/pauses/", "get", "200"): to_pause(
        "$response.body#/results/0/kind",
        "$response.body#/results/0/name",
        "resume",
        "Resume the first pause listed.",
    ),
    ("/pauses/", "post", "201"): to_pause(*SAME_PAUSE, "resume", "Resume it."),
    ("/pauses/", "post", "200"): to_pause(*SAME_PAUSE, "resume", "Resume it."),
    ("/pauses/resume/", "post", "200"): to_pause(*SAME_PAUSE, "pause", "Pause it again."),
    ("/workflows/", "get", "200"): {
        "GetWorkflow": link("getWorkflow", "The run, with its steps.", run_id=FIRST),
        "CancelWorkflow": link("cancelWorkflow", "Cancel it.", run_id=FIRST),
    },
    ("/workflows/{run_id}/", "get", "200"): {
        "CancelWorkflow": link("cancelWorkflow", "Cancel it.", run_id=ID),
    },
    ("/workflows/{run_id}/cancel/", "post", "200"): {
        "GetWorkflow": link("getWorkflow", "The run, with its steps.", run_id=ID),
    },
}


def linked(paths: dict[str, Schema]) -> dict[str, Schema]:
    """A copy of ``paths`` with ``LINKS`` set on their responses (a missing one is a KeyError)."""
    found = copy.deepcopy(paths)
    for (path, method, status), links in LINKS.items():
        found[path][method]["responses"][status]["links"] = links
    return found
