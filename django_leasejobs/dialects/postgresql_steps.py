"""PostgreSQL's ``complete_steps``: a worker's batch of workflow successes in one statement.

The ORM's version (``workflow_steps``) sends about ten statements a batch, and a group's
members pay them in turns, since every batch holds the callback's and the run's row locks
until it commits. Here data-modifying CTEs chain the writes: the jobs fenced by (id, attempt,
running), their steps (guarded by ``released`` and their latest job), the children's pending
counts decremented once per child by its parents in the batch, and the runs' counters; the
statement returns what the protocol settles next (children left with no pending parent, runs
whose every step ended). All parts see one snapshot, so no row may be written by two of them:
a released ``on_failure`` child that ends in the same batch as its parent is not decremented
(its count no longer matters: it has started). The ids are sorted, and the children and
runs are fed to their UPDATEs in id order, so that rows lock in id order, as the ORM's
version and ``job_ended`` lock them, where the plan keeps that order: the children's UPDATE
is a nested loop over the sorted side (EXPLAIN of a batch over 40 groups); the runs' may be
a hash join over the run table, which locks in the table's order. A deadlock that leaves is
retried whole (``retry_deadlocks``): the statement is one transaction.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connections

from ..core import notify
from .sql import JOB
from .tokens import Completion
from .workflow_steps import NOTHING, StepsCompleted

STEP = "django_leasejobs_workflowstep"
EDGE = "django_leasejobs_workflowedge"
RUN = "django_leasejobs_workflowrun"

_WRITES = f"""
WITH done AS (
    UPDATE {JOB} AS j
    SET status = 'succeeded', finished_at = STATEMENT_TIMESTAMP(), lease_owner = '',
        finished_by = %(finished_by)s, lease_expires_at = NULL, live_dedupe_key = NULL,
        result = NULLIF(%(results)s::jsonb -> (t.n::int - 1), 'null'::jsonb)
    FROM unnest(%(ids)s::bigint[], %(attempts)s::bigint[]) WITH ORDINALITY AS t(id, attempt, n)
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
),
ended AS (
    SELECT e.child_id, count(*) AS parents
    FROM {EDGE} AS e JOIN moved ON e.parent_id = moved.id
    WHERE e.child_id NOT IN (SELECT id FROM moved)
    GROUP BY e.child_id
    ORDER BY e.child_id
),
children AS (
    UPDATE {STEP} AS c
    SET pending_parents = GREATEST(c.pending_parents - ended.parents, 0)
    FROM ended
    WHERE c.id = ended.child_id
    RETURNING c.id, c.run_id, c.on_parent_failure, c.pending_parents, c.state
),
counted AS (
    SELECT run_id, count(*) AS steps FROM moved GROUP BY run_id ORDER BY run_id
),
runs AS (
    UPDATE {RUN} AS r
    SET steps_finished = r.steps_finished + counted.steps,
        steps_succeeded = r.steps_succeeded + counted.steps
    FROM counted
    WHERE r.id = counted.run_id
    RETURNING r.id, r.steps_finished >= r.steps_total AS ended
)"""

# What the statement returns: one row per child left with no pending parent and per run that
# ended, and the completed jobs' ids as text, in chunks (each chunk the payload of one
# notification where finishes are announced: waiting callers hear of them at commit).
_REPORT = """
SELECT 'ready', id, run_id, on_parent_failure FROM children
WHERE pending_parents = 0 AND state = 'waiting'
UNION ALL
SELECT 'run', id, NULL, NULL FROM runs WHERE ended
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
    if not rows:
        return NOTHING
    jobs = {int(i) for row in rows if row[0] == "jobs" for i in row[3].split(",")}
    ready = sorted((row[1], row[2], row[3]) for row in rows if row[0] == "ready")
    runs = sorted(row[1] for row in rows if row[0] == "run")
    return StepsCompleted(jobs, ready, runs)
