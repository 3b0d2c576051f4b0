"""Fragments of SQL every database's statements share, each written once.

The app's tables are named literally (their ``db_table``; a test checks them against the
models), and so are the conditions of its partial indexes: a statement that repeats an index's
condition term for term can use it on every database that has them. Each fragment names its
columns unqualified, for a statement where the job row is the only table with those columns in
scope. Values are never here: the statements that compose these fragments take named
parameters (``%(name)s``) and are run with a dict. What differs per database (the clock, the
locks) is in that database's folder: ``postgresql/sql.py``, ``sqlite/dialect.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

JOB = "django_leasejobs_job"
LIMITER = "django_leasejobs_limiter"
PAUSE = "django_leasejobs_pause"
JOB_LOG = "django_leasejobs_joblog"

WAITING = "status IN ('pending', 'failed')"
"""A job that may be claimed: waiting for its first attempt or for a retry."""

CLAIM_ORDER = "priority DESC, run_at, id"
"""The claim order: priority (high first), then ``run_at``, then id (the claim indexes')."""

WITH_LIMITS = "(concurrency_key IS NOT NULL OR rate_key IS NOT NULL)"
"""Jobs with a limit (the predicate of ``leasejobs_limited``)."""

WITHOUT_LIMITS = "concurrency_key IS NULL AND rate_key IS NULL"
"""Jobs without limits (the predicate of ``leasejobs_claimable``)."""


def placeholders(name: str, values: Iterable[Any]) -> tuple[str, dict[str, Any]]:
    """``%(name_0)s, %(name_1)s, ...`` for an ``IN (...)`` list, and the parameters they name.

    The one part of a statement whose text varies with a call: only the number of
    placeholders, never a value. One JSON parameter would keep the text fixed, but SQLite and
    MariaDB have no array type: each would read it with a function of its own (``json_each``,
    ``JSON_TABLE``), and SQLite's planner, no longer seeing that one queue was given, sorts all
    the queue's due rows where it read the claim index in order (``EXPLAIN QUERY PLAN``: ``USE
    TEMP B-TREE FOR ORDER BY``).
    """
    named = {f"{name}_{i}": value for i, value in enumerate(values)}
    return ", ".join(f"%({key})s" for key in named), named
