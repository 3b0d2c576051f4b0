"""Which database the app's tables live in: one answer, asked by every reader and writer.

Every statement of the library picks its alias here (through ``protocol.job_database``, which
is this function), never with its own ``router.db_for_write`` or ``DEFAULT_DB_ALIAS``: a project
that moves its jobs to a database of their own (``LEASEJOBS_DATABASE``) must find enqueue, the
worker, the admin, the API, the commands and the tasks backend all in that one database, and a
project with one database must find nothing changed. (API tokens are the one exception: they
point at the user model, so ``JobsRouter`` keeps them where the users are.)
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

from django.db import DEFAULT_DB_ALIAS, router

from ..core.conf import settings
from .api import ApiToken
from .jobs import Job

_serving: ContextVar[str | None] = ContextVar("leasejobs_database", default=None)
"""The queue database the code running here works on, when not the home one: a worker's
``--database``, an enqueue routed by its queue, an admin page's ``?database=``."""


def job_database() -> str:
    """The alias of the database that holds the jobs worked on here: the one
    :func:`using_database` names around this code (a shard), else :func:`home_database`.
    Writes and the reads that decide a job's fate both use it."""
    return _serving.get() or home_database()


def home_database() -> str:
    """``LEASEJOBS_DATABASE`` when set, else where Django's routers send ``Job`` (the
    behaviour before the setting existed), else ``default``: where every queue that
    ``LEASEJOBS_QUEUE_DATABASES`` does not route elsewhere lives."""
    return settings.DATABASE or router.db_for_write(Job) or DEFAULT_DB_ALIAS


@contextlib.contextmanager
def using_database(alias: str | None) -> Iterator[None]:
    """Work on the queue database ``alias`` inside the block (``None``: the home one).

    Context-local (a ``ContextVar``): threads a worker starts inside the block work there too
    (``runtime.threads``), and nothing leaks to other requests or threads.
    """
    if alias is None:
        yield
        return
    token = _serving.set(alias)
    try:
        yield
    finally:
        _serving.reset(token)


def queue_database(queue: str) -> str:
    """Where a job of ``queue`` is written: ``LEASEJOBS_QUEUE_DATABASES``'s exact entry for
    it, else its first glob that matches, else :func:`home_database`."""
    routes = settings.QUEUE_DATABASES
    if not routes:
        return home_database()
    if queue in routes:
        return routes[queue]
    for pattern, alias in routes.items():
        if fnmatch.fnmatchcase(queue, pattern):
            return alias
    return home_database()


def databases_of(queues: Iterable[str]) -> dict[str, list[str]]:
    """Each database the ``queues`` route to, with the queues sent there (sorted): one
    enqueue, one workflow, writes to one database only, and says which when it cannot."""
    found: dict[str, list[str]] = {}
    for queue in sorted(set(queues)):
        found.setdefault(queue_database(queue), []).append(queue)
    return found


def queue_databases() -> list[str]:
    """Every queue database: the home one first, then each ``LEASEJOBS_QUEUE_DATABASES``
    names, once. Operators' views (``checkjobs``, ``jobstats``, the admin) look at all."""
    found = [home_database()]
    for alias in settings.QUEUE_DATABASES.values():
        if alias not in found:
            found.append(alias)
    return found


def read_database(database: str | None = None) -> str:
    """Where the read side (the admin's lists and dashboard, stats, the API's lists, the
    detailed health answers) reads: the replica ``LEASEJOBS_READ_DATABASES`` names for the
    queue database (``database``, else :func:`job_database`), else the queue database when
    ``LEASEJOBS_DATABASE`` is set, else the routers' read choice for ``Job`` (a project's
    replica router keeps its reads off the primary, as before the settings), else ``default``.

    A replica may be seconds behind, so nothing that decides a job's fate reads here (claims,
    leases, results, dedupe, limits, admin actions): :func:`job_database` does.
    """
    replica = replica_database(database)
    if replica is not None:
        return replica
    if database is not None:
        return database
    return _serving.get() or settings.DATABASE or router.db_for_read(Job) or DEFAULT_DB_ALIAS


def replica_database(database: str | None = None) -> str | None:
    """The replica ``LEASEJOBS_READ_DATABASES`` gives the queue database (``database``, else
    :func:`job_database`); ``None`` without one. The admin shows its lag beside what it read."""
    return settings.READ_DATABASES.get(database or job_database())


def probe_database() -> str:
    """Where a verdict reads (``checkjobs``, the anonymous health answer, a burst worker's
    "left behind"): the queue database itself when ``LEASEJOBS_READ_DATABASES`` gives it a
    replica, which may still show as due the jobs already done; else :func:`read_database`, as
    before the setting (a project's own replica router keeps its choice)."""
    return job_database() if replica_database() is not None else read_database()


def primary_of(alias: str) -> str:
    """The queue database whose replica ``alias`` is (``LEASEJOBS_READ_DATABASES``), else
    ``alias``: a job read from a list may carry the replica's alias, and waiting for its result
    must read the primary, where the worker writes it."""
    for primary, replica in settings.READ_DATABASES.items():
        if replica == alias and primary != alias:
            return primary
    return alias


def token_database() -> str:
    """Where API tokens are: wherever the routers send them (``JobsRouter`` leaves them with
    the users they point at, since a foreign key cannot cross databases), else ``default``."""
    return router.db_for_write(ApiToken) or DEFAULT_DB_ALIAS
