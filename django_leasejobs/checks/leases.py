"""The lease advisor's system checks: what the recorded runtimes say about the leases.

| id | what |
|---|---|
| ``leasejobs.W005`` | a job's p99 runtime exceeds its lease and no heartbeat renews that lease |
| ``leasejobs.W006`` | a job's stale reports exceed 1 % of its runs in the last day |

They read the per-hour runtime rows, so they carry Django's ``database`` tag like ``E007``:
they run with ``manage.py check --database default`` (and before ``migrate``, when they find
no table yet and say nothing), never on a plain ``check``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.core import checks
from django.db import connections, router

from ..reports.lease_advice import seconds_text

if TYPE_CHECKING:
    from ..reports.advisor import JobLeases

Messages = list[checks.CheckMessage]
HINT = (
    "Run manage.py jobstats --leases for a suggested lease and heartbeat; see docs/operations.md."
)


def register() -> None:
    checks.register(check_leases, checks.Tags.database)


def check_leases(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> Messages:
    from ..models import RuntimeStat  # checks.py is imported before the models are ready
    from ..reports import advisor

    messages: Messages = []
    for alias in databases or ():
        if not router.allow_migrate_model(alias, RuntimeStat):
            continue
        table = RuntimeStat._meta.db_table
        if table not in connections[alias].introspection.table_names():
            continue  # not migrated yet: no runs to judge
        for job in advisor.collect(using=alias):
            messages += job_messages(job)
    return messages


def job_messages(job: JobLeases) -> Messages:
    messages: Messages = []
    if job.p99_over_lease and job.heartbeat_off and job.p99 is not None and job.lease:
        messages.append(
            checks.Warning(
                f"Job {job.name}: its p99 runtime ({seconds_text(job.p99)}) exceeds its lease "
                f"({seconds_text(job.lease)}) and no heartbeat renews the lease: healthy runs "
                "lose their claim and another worker runs the job again.",
                hint=HINT,
                id="leasejobs.W005",
            )
        )
    if job.too_stale:
        messages.append(
            checks.Warning(
                f"Job {job.name}: {job.stale_last_day} stale reports in {job.runs_last_day} runs "
                f"of the last day ({job.stale_share:.1%}): leases lapse under live workers, so "
                "runs are duplicated.",
                hint=HINT,
                id="leasejobs.W006",
            )
        )
    return messages
