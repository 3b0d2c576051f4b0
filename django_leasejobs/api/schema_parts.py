"""The pieces the OpenAPI document's schemas are built from, and the models' choices written out.

``ref``, ``nullable``, ``obj`` and ``page_of`` spell the JSON Schema forms every component uses,
so a component reads as its fields; ``query`` and ``path_id`` spell an operation's parameters.
The choices are here because the document is built without settings (``python -m
django_leasejobs.api.schema``), so without importing the models.
"""

from __future__ import annotations

from typing import Any

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


def page_of(item: str) -> Schema:
    return obj(
        {"results": {"type": "array", "items": ref(item)}, "next_cursor": nullable("string")}
    )


STATUSES = ["pending", "running", "succeeded", "failed", "dead", "cancelled"]
RUN_STATUSES = ["running", "succeeded", "failed", "cancelled"]
STEP_STATES = ["waiting", "held", "released", "succeeded", "failed", "cancelled", "skipped"]
POLICIES = ["cancel", "run", "hold", "on_failure"]
"""The workflow models' choices, written out: ``python -m django_leasejobs.api.schema`` builds
the document without settings, so without importing the models (a test compares them)."""


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


DATABASE = query(
    "database",
    {"type": "string"},
    "The queue database to work on (LEASEJOBS_QUEUE_DATABASES): its alias, as a job's "
    "database field gives it; default: the home one. Ids repeat across databases.",
)
"""Taken by every operation but the enqueues, which their queues route (``endpoint``)."""
