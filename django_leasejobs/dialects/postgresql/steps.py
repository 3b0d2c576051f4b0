"""PostgreSQL's workflow steps: a worker's batch of workflow successes in two statements.

``COMPLETE_STEPS`` writes the jobs (fenced by id, attempt and ``running``) and moves their
steps (guarded by ``released`` and their latest job) with data-modifying CTEs, and announces
the jobs in the same statement. ``COUNT_STEPS`` applies the counts the protocol computed from
the moved steps' edges (``protocol.workflow_completions``): each child's pending parents, then
each run's counters, and returns the children left with no pending parent and the runs whose
every step ended.

The lock order (jobs, steps, children by id, runs by id) is the statement's structure, not
its plan's: each of the shared tables is locked by a ``SELECT ... ORDER BY id FOR UPDATE``
(its ``LockRows`` node sits above the sort, so rows lock in id order whatever the scan), in a
``MATERIALIZED`` CTE that the UPDATE joins. The UPDATE writes only rows that CTE has handed
out, so locked already; its own join may be a hash join in table order (one was, over the run
table, and deadlocked with ``job_ended``): it no longer takes a lock another transaction could
be waiting on in the other order. The runs are locked only once every child has been written
(their CTE's ``NOT EXISTS`` on the ready children is evaluated first, and reads the whole
children UPDATE when none is ready), and only when no child was left ready: the protocol then
enqueues those first (which may import a job's module) and counts the runs after, so no code
is imported while a run's row is locked.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connections

from ..base.workflow_steps import Counted, StepsCompleted
from ..tokens import Completion
from . import notify
from .sql import JOB, SUCCEEDED_SET, TOKENS

STEP = "django_leasejobs_workflowstep"
EDGE = "django_leasejobs_workflowedge"
RUN = "django_leasejobs_workflowrun"

_WRITES = f"""
WITH done AS (
    UPDATE {JOB} AS j
    SET {SUCCEEDED_SET}
    FROM {TOKENS}
    WHERE j.id = t.id AND j.attempt = t.attempt AND j.status = 'running'
      AND j.workflow_step_id IS NOT NULL
    RETURNING j.id, j.workflow_step_id
),
moved AS (
    UPDATE {STEP} AS s
    SET state = 'succeeded', finished_at = STATEMENT_TIMESTAMP()
    FROM done
    WHERE s.id = done.workflow_step_id AND s.job_id = done.id AND s.state = 'released'
    RETURNING s.id, s.run_id
)"""

# One row per step moved, and the completed jobs' ids as text, in chunks (each chunk the
# payload of one notification where finishes are announced: waiting callers hear of them at
# commit).
_REPORT = """
SELECT 'step', id, run_id, NULL FROM moved
UNION ALL
SELECT 'jobs', NULL, NULL, {ids} FROM (
    SELECT array_to_string(array_agg(id), ',') AS ids FROM (
        SELECT id, (row_number() OVER () - 1) / %(ids_per_notification)s AS chunk FROM done
    ) AS numbered GROUP BY chunk
) AS chunks
"""

COMPLETE_STEPS = _WRITES + _REPORT.format(ids="ids")
COMPLETE_STEPS_ANNOUNCED = _WRITES + _REPORT.format(
    ids="ids || left(pg_notify(%(finished_channel)s, ids)::text, 0)"
)
"""The same, announcing each chunk (``pg_notify`` returns void: appended as no text)."""

COUNT_STEPS = f"""
WITH child_locks AS MATERIALIZED (
    SELECT id FROM {STEP} WHERE id = ANY(%(children)s::bigint[]) ORDER BY id FOR UPDATE
),
children AS (
    UPDATE {STEP} AS c
    SET pending_parents = GREATEST(c.pending_parents - d.parents, 0)
    FROM unnest(%(children)s::bigint[], %(parents)s::int[]) AS d(id, parents)
    JOIN child_locks AS l ON l.id = d.id
    WHERE c.id = d.id
    RETURNING c.id, c.run_id, c.on_parent_failure, c.pending_parents, c.state
),
ready AS (
    SELECT id, run_id, on_parent_failure FROM children
    WHERE pending_parents = 0 AND state = 'waiting'
),
run_locks AS MATERIALIZED (
    SELECT id FROM {RUN}
    WHERE id = ANY(%(runs)s::bigint[]) AND NOT EXISTS (SELECT 1 FROM ready)
    ORDER BY id FOR UPDATE
),
runs AS (
    UPDATE {RUN} AS r
    SET steps_finished = r.steps_finished + d.steps,
        steps_succeeded = r.steps_succeeded + d.steps
    FROM unnest(%(runs)s::bigint[], %(steps)s::int[]) AS d(id, steps)
    JOIN run_locks AS l ON l.id = d.id
    WHERE r.id = d.id
    RETURNING r.id, r.steps_finished >= r.steps_total AS ended
)
SELECT 'ready', id, run_id, on_parent_failure FROM ready
UNION ALL
SELECT 'run', id, NULL, NULL FROM runs WHERE ended
"""
"""Each child loses the parents given, then (when none is left ready) each run counts the
steps given; the children left ready (id, run, policy) and the runs that ended."""


def complete_steps(alias: str, completions: list[Completion], finished_by: str) -> StepsCompleted:
    """Run ``COMPLETE_STEPS`` for these attempts (in the caller's transaction)."""
    ordered = sorted(completions, key=lambda c: c.id)
    results = None  # no result at all: NULL, and every row's result is NULL
    if any(c.result is not None for c in ordered):
        results = json.dumps([c.result for c in ordered])
    params: dict[str, Any] = {
        "finished_by": finished_by,
        "results": results,
        "ids": [int(c.id) for c in ordered],
        "attempts": [int(c.attempt) for c in ordered],
        "ids_per_notification": notify.IDS_PER_NOTIFICATION,
    }
    sql = COMPLETE_STEPS
    if notify.supported(alias):
        sql, params["finished_channel"] = COMPLETE_STEPS_ANNOUNCED, notify.FINISHED_CHANNEL
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    jobs = {int(i) for row in rows if row[0] == "jobs" for i in row[3].split(",")}
    moved = {int(row[1]): int(row[2]) for row in rows if row[0] == "step"}
    return StepsCompleted(jobs, moved)


def count_steps(alias: str, children: dict[int, int], runs: dict[int, int]) -> Counted:
    """Run ``COUNT_STEPS`` (in the caller's transaction)."""
    child_ids, run_ids = sorted(children), sorted(runs)
    params: dict[str, Any] = {
        "children": child_ids,
        "parents": [children[i] for i in child_ids],
        "runs": run_ids,
        "steps": [runs[i] for i in run_ids],
    }
    with connections[alias].cursor() as cursor:
        cursor.execute(COUNT_STEPS, params)
        rows = cursor.fetchall()
    ready = sorted((row[1], row[2], row[3]) for row in rows if row[0] == "ready")
    ended = sorted(row[1] for row in rows if row[0] == "run")
    return Counted(ready, ended, counted=not ready)
