"""Re-run a guarded write that the database chose as a deadlock victim.

InnoDB (MariaDB, MySQL) and PostgreSQL both break a lock cycle by rolling back one of the
transactions in it. Two guarded writes on the same job (a completion and a lease recovery, say)
can lock the row's primary key and a secondary index entry in opposite orders; the victim's
transaction is rolled back whole, so running it again is safe: every protocol write is guarded
by its token and does nothing when another write won. MySQL's manual asks applications to be
ready to do exactly this.

On PostgreSQL a final state moves its row from the live partition to the history's (the job
table is partitioned, docs/operations.md#history-partitions): a write that waited for that row
is then refused with SQLSTATE 40001 ("tuple ... moved to another partition due to concurrent
update") instead of re-checking its guard, its transaction rolled back the same way. Run again,
the write finds the row finished and changes nothing, as its guard says.

Only a write that owns its transaction is retried: inside a caller's ``atomic()`` block (or with
autocommit turned off) the rollback took the caller's earlier writes too, so the error is passed
on for the caller to see.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.db import OperationalError, connections

from ..models.databases import job_database

logger = logging.getLogger("django_leasejobs")

ATTEMPTS = 3
_MYSQL_DEADLOCK = 1213
_POSTGRESQL_DEADLOCK = "40P01"
_POSTGRESQL_ROW_MOVED = "40001"  # serialization_failure: only a moved row, at READ COMMITTED

P = ParamSpec("P")
R = TypeVar("R")


def is_deadlock(exc: BaseException) -> bool:
    """True when the driver error under ``exc`` says "deadlock, transaction rolled back", or
    (PostgreSQL) that the row it waited for moved to another partition."""
    cause = exc.__cause__ or exc
    # psycopg 3 names the SQLSTATE ``sqlstate``, psycopg2 ``pgcode``.
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if code in (_POSTGRESQL_DEADLOCK, _POSTGRESQL_ROW_MOVED):
        return True
    args: tuple[Any, ...] = tuple(getattr(cause, "args", ()))
    return bool(args) and args[0] == _MYSQL_DEADLOCK


def retry_deadlocks(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function`` again (up to ``ATTEMPTS`` times in all) when it loses a deadlock."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        alias = job_database()
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return function(*args, **kwargs)
            except OperationalError as exc:
                connection = connections[alias]
                if (
                    attempt == ATTEMPTS
                    or connection.in_atomic_block
                    or not connection.get_autocommit()  # the caller's own transaction
                    or not is_deadlock(exc)
                ):
                    raise
                logger.warning(
                    "job.deadlock write=%s try=%s error=%s", function.__name__, attempt, exc
                )
                # A short random pause, so the two sides do not collide again in step.
                time.sleep(random.uniform(0, 0.01 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    return wrapper
