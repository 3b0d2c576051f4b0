"""Queues named before a trailing ``:<digits>`` became a thread budget.

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
from django.db import connections, router

from ..core.conf import BUDGET_LIKE

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
