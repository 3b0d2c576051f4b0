"""Re-run a guarded write that the database chose as a deadlock victim.

InnoDB (MariaDB, MySQL) and PostgreSQL both break a lock cycle by rolling back one of the
transactions in it. Two guarded writes on the same job (a completion and a lease recovery, say)
can lock the row's primary key and a secondary index entry in opposite orders; the victim's
transaction is rolled back whole, so running it again is safe: every protocol write is guarded
by its token and does nothing when another write won. MySQL's manual asks applications to be
ready to do exactly this.

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

P = ParamSpec("P")
R = TypeVar("R")


def is_deadlock(exc: BaseException) -> bool:
    """True when the driver error under ``exc`` says "deadlock, transaction rolled back"."""
    cause = exc.__cause__ or exc
    # psycopg 3 names the SQLSTATE ``sqlstate``, psycopg2 ``pgcode``.
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if code == _POSTGRESQL_DEADLOCK:
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
