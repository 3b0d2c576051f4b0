"""Which queue database a new job is written in: its queue's (``LEASEJOBS_QUEUE_DATABASES``).

An enqueue is routed by the job's queue, not by the code that calls it: a handler run by a
worker of one shard that enqueues to another queue writes where that queue lives. What writes
several jobs at once (``enqueue_many``, a workflow) writes in one database, and is refused
with the databases and queues named when its jobs would route to two: one transaction cannot
span two databases, and a workflow's steps unblock each other in one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from ..core import registry
from ..core.conf import settings
from ..errors import JobValidationError
from ..models.databases import databases_of, using_database
from .base import job_database


def queue_of(name: str, queue: Any, task_backend: str = "") -> Any:
    """The queue a job of ``name`` goes to: ``queue`` when given, else its default (a
    ``django.tasks`` task's: ``LEASEJOBS_DEFAULT_QUEUE``). Unchecked: the enqueue checks it."""
    if queue is not None:
        return queue
    if task_backend:
        return settings.DEFAULT_QUEUE
    return registry.get(registry.canonical(name)).get_queue()


@contextlib.contextmanager
def routed(name: str, queue: Any, task_backend: str = "") -> Iterator[str]:
    """Work on the database a job of ``name`` in ``queue`` is written in; yields its alias.

    Without ``LEASEJOBS_QUEUE_DATABASES`` that is :func:`job_database`, as it always was.
    """
    if not settings.QUEUE_DATABASES:
        yield job_database()
        return
    using = one_database("this job", [(name, queue, task_backend)])
    with using_database(using):
        yield using


def one_database(what: str, jobs: Iterable[tuple[str, Any, str]]) -> str:
    """The one database the jobs ``(name, queue, task_backend)`` route to; a
    ``JobValidationError`` naming each database and its queues when they route to several.

    A job whose queue is not a valid name (or whose name is not registered) is left to the
    enqueue, which refuses it with its own message: it routes to :func:`job_database` here.
    """
    queues = []
    for name, queue, task_backend in jobs:
        try:
            queue = queue_of(name, queue, task_backend)
        except JobValidationError:
            queue = None
        if isinstance(queue, str):
            queues.append(queue)
    found = databases_of(queues) if queues else {}
    if len(found) > 1:
        where = "; ".join(
            f"{alias!r} for {', '.join(map(repr, names))}" for alias, names in found.items()
        )
        raise JobValidationError(
            f"{what} would be written in {len(found)} databases ({where}: "
            "LEASEJOBS_QUEUE_DATABASES), and one write goes to one database. Split it by "
            "database, or route these queues to one."
        )
    return next(iter(found), job_database())
