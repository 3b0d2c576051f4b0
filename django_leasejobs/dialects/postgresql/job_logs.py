"""PostgreSQL's ``insert_logs``: a flush's log rows from one JSON parameter.

Django's bulk insert sends the rows as arrays, the records a ``jsonb[]`` that psycopg quotes
element by element in Python under client-side binding: most of a grouped flush's time when
the attempts' logs are kept (docs/benchmarks.md, observability). One ``json.dumps`` of the
rows, expanded by the server, instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connections

from ..base.dialect import LogRow
from ..sql import JOB_LOG

INSERT_LOGS = f"""
INSERT INTO {JOB_LOG} (job_id, attempt, records, size)
SELECT (r->>0)::bigint, (r->>1)::integer, r->2, (r->>3)::integer
FROM jsonb_array_elements(%(rows)s::jsonb) AS r
"""
"""Each row a JSON array, [job_id, attempt, records, size]: a ``LogRow`` as ``json.dumps``
writes it."""

LOGGED = f"""
logged AS (
    INSERT INTO {JOB_LOG} (job_id, attempt, records, size)
    SELECT (r->>0)::bigint, (r->>1)::integer, r->2, (r->>3)::integer
    FROM jsonb_array_elements(%(logs)s::jsonb) AS r
    WHERE (r->>0)::bigint IN (SELECT id FROM done)
),"""
"""The same rows as a step of the grouped completion (``WITH ... done AS (UPDATE ...)``): only
those of the jobs it completed. PostgreSQL runs a data-modifying ``WITH`` step whether or not
the query reads it."""


def insert(alias: str, rows: Sequence[LogRow]) -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute(INSERT_LOGS, {"rows": encoded(rows)})


def encoded(rows: Sequence[LogRow]) -> str:
    """The rows as the one JSON parameter both statements expand."""
    return json.dumps(rows)
