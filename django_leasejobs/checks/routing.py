"""System checks of a queue database of its own: the setting, the router, the tables there.

``LEASEJOBS_DATABASE`` tells the library where its tables are; ``JobsRouter`` tells Django
(``migrate``, the admin, related lookups). One without the other splits the app over two
databases: the library would write jobs where ``migrate`` never made the tables, or the admin
would list a database the workers never read. Hence:

- ``leasejobs.E015``: ``LEASEJOBS_DATABASE`` is set but Django's routers send the app's models
  elsewhere (``JobsRouter`` missing from ``DATABASE_ROUTERS``, or behind a router that answers
  for every model)
- ``leasejobs.E016``: ``JobsRouter`` is in ``DATABASE_ROUTERS`` but ``LEASEJOBS_DATABASE`` is
  not set
- ``leasejobs.E017`` (database check): a queue database (``LEASEJOBS_DATABASE``'s, or a shard
  of ``LEASEJOBS_QUEUE_DATABASES``), checked from another database (``check --database
  default``, ``migrate``), lacks the app's migrations. Checked on itself
  it is the warning ``leasejobs.W010`` instead, so ``migrate --database jobs`` can run.
- ``leasejobs.E018``: a key of ``LEASEJOBS_READ_DATABASES`` is not a queue database: its
  replica would never be read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import router

from ..core.conf import PREFIX, settings
from ..db import migration_state
from ..db.routing import JobsRouter
from ..models import Job
from ..models.databases import queue_databases

ROUTER_PATH = "django_leasejobs.routers.JobsRouter"
HINT = "See docs/databases.md#a-queue-database-of-its-own."
SHARDS_HINT = "See docs/databases.md#shards-queues-in-several-databases."

Messages = list[checks.CheckMessage]


def check_router(app_configs: Any = None, **kwargs: Any) -> Messages:
    """E015 and E016: the setting and the routers agree on where the app's tables are."""
    try:
        alias = settings.DATABASE
    except ImproperlyConfigured:
        return []  # leasejobs.E001 reports the bad value
    routed = any(isinstance(each, JobsRouter) for each in router.routers)
    if alias is None:
        if not routed:
            return []
        return [
            checks.Error(
                f"{ROUTER_PATH} is in DATABASE_ROUTERS but {PREFIX}DATABASE is not set: the "
                "router would send the app's models nowhere, and the library would use "
                "wherever the other routers (or default) say.",
                hint=f'Set {PREFIX}DATABASE = "jobs" (the alias of the queue database), or '
                f"remove the router. {HINT}",
                id="leasejobs.E016",
            )
        ]
    chosen = {router.db_for_write(Job), router.db_for_read(Job)}
    if chosen == {alias}:
        return []
    elsewhere = ", ".join(sorted(repr(each or "default") for each in chosen))
    why = "it is not in DATABASE_ROUTERS" if not routed else "a router before it answers first"
    return [
        checks.Error(
            f"{PREFIX}DATABASE is {alias!r} but Django's routers send the app's models to "
            f"{elsewhere} ({ROUTER_PATH}: {why}): migrate, the admin and related lookups "
            "would use another database than the library.",
            hint=f'Put "{ROUTER_PATH}" first in DATABASE_ROUTERS. {HINT}',
            id="leasejobs.E015",
        )
    ]


def check_queue_migrated(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> Messages:
    """E017: a queue database (``LEASEJOBS_DATABASE``, or a shard of
    ``LEASEJOBS_QUEUE_DATABASES``) lacks the app's migrations, seen from another."""
    checked = set(databases or ())
    try:
        named = _named_queue_databases()
    except ImproperlyConfigured:
        return []  # leasejobs.E001 reports the bad value
    found: Messages = []
    for alias, (why, hint) in named.items():
        if not checked or alias in checked or alias not in django_settings.DATABASES:
            continue
        try:
            missing = migration_state.unapplied(alias)
        except migration_state.Unreachable:
            continue  # down is not unmigrated
        if missing:
            found.append(
                checks.Error(
                    f"{migration_state.state(alias, missing)}: {why}, so enqueues and workers "
                    "would fail.",
                    hint=f"Run `python manage.py {migration_state.migrate_command(alias)}` (a "
                    f"plain `migrate` migrates default only). {hint}",
                    id="leasejobs.E017",
                )
            )
    return found


def _named_queue_databases() -> dict[str, tuple[str, str]]:
    """The queue databases a setting names, with which setting and the docs' section on it:
    E017's to check."""
    named = {}
    if settings.DATABASE is not None:
        named[settings.DATABASE] = (f"it is {PREFIX}DATABASE", HINT)
    for pattern, alias in settings.QUEUE_DATABASES.items():
        named.setdefault(alias, (f"{PREFIX}QUEUE_DATABASES sends {pattern!r} to it", SHARDS_HINT))
    return named


def check_read_databases(app_configs: Any = None, **kwargs: Any) -> Messages:
    """E018: each key of ``LEASEJOBS_READ_DATABASES`` is the queue database."""
    try:
        replicas = settings.READ_DATABASES
        known = queue_databases()
    except ImproperlyConfigured:
        return []  # leasejobs.E001 reports the bad value
    return [
        checks.Error(
            f"{PREFIX}READ_DATABASES maps {primary!r}, which is not a queue database (the "
            f"jobs are in {', '.join(map(repr, known))}): its replica {replica!r} would never "
            "be read.",
            hint=f'Key the replica by the queue database: {{"{known[0]}": "{replica}"}}. '
            "See docs/databases.md#read-replicas.",
            id="leasejobs.E018",
        )
        for primary, replica in replicas.items()
        if primary not in known
    ]


def register() -> None:
    checks.register(check_router, "leasejobs")
    checks.register(check_read_databases, "leasejobs")
    checks.register(check_queue_migrated, checks.Tags.database)
