"""System checks of queues: those a job would be sent to but ``LEASEJOBS_QUEUES`` does not
declare (``leasejobs.E012``, ``E013``: :func:`undeclared_queues`, part of the schedules' check),
and those named before a trailing ``:<digits>`` became a thread budget.

| id | what |
|---|---|
| ``leasejobs.W013`` | a queue in use is named with a trailing ``:<digits>`` |

``runjobworker --queues mail:10,reports:2`` reads ``:<digits>`` as the queue's threads, so new
queue names cannot end so (an enqueue, ``@job(queue=...)`` and ``LEASEJOBS_QUEUES`` refuse
them). Queues named that way before are found where looking is cheap: the dashboard's
per-minute queue samples (one row per queue and minute, pruned), paused queues and the schedules
table. Not the jobs table itself, whose queues a check would have to scan on every run. A
database check (``manage.py check --database default``), like ``W005``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router

from ..core import registry
from ..core.conf import PREFIX, settings
from ..core.value_rules import BUDGET_LIKE

Messages = list[checks.CheckMessage]


def register() -> None:
    checks.register(check_budget_like_queues, checks.Tags.database)


def check_budget_like_queues(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> Messages:
    from ..models import Pause, PauseKind, QueueSample, Schedule  # not ready at import

    names: set[str] = set()
    for alias in databases or ():
        if not router.allow_migrate_model(alias, QueueSample):
            continue
        tables = set(connections[alias].introspection.table_names())
        if QueueSample._meta.db_table in tables:
            names.update(
                QueueSample.objects.using(alias).values_list("queue", flat=True).distinct()
            )
        if Pause._meta.db_table in tables:
            paused = Pause.objects.using(alias).filter(kind=PauseKind.QUEUE)
            names.update(paused.values_list("name", flat=True))
        if Schedule._meta.db_table in tables:
            names.update(Schedule.objects.using(alias).values_list("queue", flat=True))
    return [
        checks.Warning(
            f"Queue {name!r} ends in ':' and digits, which `runjobworker --queues` reads as a "
            "number of threads: no worker can name it, and no new job can be sent to it.",
            hint="Send new jobs to a queue named without them (mail-10, mail_10); a worker "
            "started with --queues '*' still runs the jobs left in this one.",
            id="leasejobs.W013",
        )
        for name in sorted(names)
        if name and BUDGET_LIKE.fullmatch(name)
    ]


def undeclared_queues(queues: list[str]) -> Messages:
    """With ``LEASEJOBS_QUEUES`` set, every queue a job can be sent to must be declared.

    Errors, so that ``runjobworker``, ``runserver`` and ``migrate`` refuse to start: an enqueue
    to an undeclared queue raises ``JobValidationError``, which would otherwise surface only at
    the first enqueue, in production. A job with no queue of its own goes to the default queue
    and is covered by E013 alone (one message, not one per job).
    """
    messages: Messages = []
    try:
        default = settings.DEFAULT_QUEUE
    except ImproperlyConfigured:
        default = None  # reported as leasejobs.E001
    if default is not None and default not in queues:
        messages.append(
            checks.Error(
                f"{PREFIX}DEFAULT_QUEUE is {default!r}, which is not in {PREFIX}QUEUES: every "
                "job that names no queue would be refused at enqueue.",
                hint=f"Add {default!r} to {PREFIX}QUEUES or set {PREFIX}DEFAULT_QUEUE to one of "
                f"{', '.join(queues)}.",
                id="leasejobs.E013",
            )
        )
    for job_name, job_function in sorted(registry.registered().items()):
        queue = job_function.queue
        if queue is not None and queue not in queues:
            messages.append(
                checks.Error(
                    f"Job {job_name!r} goes to queue {queue!r}, which is not in "
                    f"{PREFIX}QUEUES: its enqueues would be refused.",
                    hint=f"Add {queue!r} to {PREFIX}QUEUES or change the job's queue.",
                    id="leasejobs.E012",
                )
            )
    return messages
