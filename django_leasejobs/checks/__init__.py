"""System checks: misconfiguration reported by ``manage.py check`` with stable ids.

- ``leasejobs.E001``: a ``LEASEJOBS_*`` setting has a bad value (wrong type, out of range; a
  ``LEASEJOBS_MONITORING_TOKEN`` too short or with characters a bearer token cannot carry,
  reported without its value)
- ``leasejobs.E002``: ``LEASEJOBS_HEARTBEAT_SECONDS`` is not shorter than
  ``LEASEJOBS_LEASE_SECONDS`` (leases expire between beats)
- ``leasejobs.W002``: the heartbeat is more than a third of the lease (one late beat loses it)
- ``leasejobs.E003``: a schedule in ``LEASEJOBS_SCHEDULES`` is malformed: not a dict, no ``job``
  or ``cron``, an invalid cron expression or timezone, arguments its job cannot take
- ``leasejobs.E004``: a schedule names a job that is not registered
- ``leasejobs.E005``: a schedule's queue is not in ``LEASEJOBS_QUEUES`` (when that list is set)
- ``leasejobs.E006``: two different functions are registered under one job name
- ``leasejobs.E007``: the database version is not supported: PostgreSQL < 13, SQLite < 3.35,
  MariaDB < 10.6, MySQL < 8 (database check)
- ``leasejobs.E008``: ``LEASEJOBS_METRICS`` is on but prometheus-client is not installed
- ``leasejobs.E009``: ``USE_TZ = False`` with a ``TIME_ZONE`` other than UTC: delays, leases and
  backoff would be off by the zone's offset
- ``leasejobs.E010``: ``LEASEJOBS_API_JOBS`` names a job that is not registered
- ``leasejobs.E011``: ``LEASEJOBS_API_PAGE_SIZE`` is larger than ``LEASEJOBS_API_MAX_PAGE_SIZE``
- ``leasejobs.E012``: a job's own queue (``@job(queue=...)``) is not in ``LEASEJOBS_QUEUES``
  (when that list is set): its enqueues would be refused
- ``leasejobs.E013``: ``LEASEJOBS_DEFAULT_QUEUE`` is not in ``LEASEJOBS_QUEUES`` (when that list
  is set): every job that names no queue would be refused
- ``leasejobs.E014``: an ``@job(aliases=)`` entry is also a registered job's name, or two jobs
  list it (:mod:`django_leasejobs.checks.jobs`)
- ``leasejobs.W001``: SQLite not in WAL mode: the workers' writes and web requests block each
  other (database check)
- ``leasejobs.W016``: PostgreSQL's autovacuum is off: the job table's dead row versions are
  never reclaimed (database check)
- ``leasejobs.W003``: an unknown ``LEASEJOBS_*`` setting, probably a typo (with a suggestion)
- ``leasejobs.W004``: retired: a job's undeclared queue is now the error ``E012``
- ``leasejobs.W005``, ``W006``: the lease advisor's, in :mod:`django_leasejobs.checks.leases`
- ``leasejobs.W013``: a queue in use is named with a trailing ``:<digits>``, which
  ``runjobworker --queues`` reads as a thread budget (:mod:`django_leasejobs.checks.queues`)
- ``leasejobs.W007``: ``LEASEJOBS_EAGER`` with ``DEBUG = False``: a test setting that reached
  production, where each enqueue would run its job inside the request, with no worker, retry,
  lease or timeout
- ``leasejobs.E015``: ``LEASEJOBS_DATABASE`` is set but the routers send the app's models
  elsewhere: ``JobsRouter`` missing, or behind a router that answers first
  (:mod:`django_leasejobs.checks.routing`)
- ``leasejobs.E016``: ``JobsRouter`` is in ``DATABASE_ROUTERS`` without ``LEASEJOBS_DATABASE``
- ``leasejobs.E017``: the queue database of its own lacks the app's migrations, seen from
  another database (database check; on itself it is ``W010``, so ``migrate`` can fix it)
- ``leasejobs.E018``: a key of ``LEASEJOBS_READ_DATABASES`` is not the queue database, so its
  replica would never be read (:mod:`django_leasejobs.checks.routing`)
- ``leasejobs.W010``: the app's migrations are not all applied on the database (database check,
  in :mod:`django_leasejobs.db.migration_state`; a warning, so that ``migrate`` itself is not
  stopped): the app's commands refuse to start until ``migrate`` has run
- ``leasejobs.W099``, ``E099``: jobs a worker could not find
  (:mod:`django_leasejobs.checks.jobs`)
- ``leasejobs.W015``: ``LEASEJOBS_HISTORY_PARTITION`` longer than the shortest retention
  age: on PostgreSQL those jobs are kept up to the two together
- ``leasejobs.W014``: a job registered at start from a module outside the installed apps'
  packages and ``LEASEJOBS_TASK_MODULES``, which a worker has only if its own start imports it
  too (:mod:`django_leasejobs.checks.jobs`)

The database checks (E007, W001, W016, E017) carry Django's ``database`` tag: they run with
``manage.py check --database default`` and before ``migrate``, never on a plain ``check``.

One module per topic: ``settings`` (E001, E002, W002, W003, E008, E009, E011, W007, W015),
``schedules`` (E003 to E005, W012, and the check that runs E006, E010, E012 and E013 with
them), ``jobs`` (E006, E010, E014, W011, W014, W099, E099), ``queues`` (E012, E013, W013),
``leases`` (W005, W006), ``databases`` (E007, W001, W016) and ``routing`` (E015 to E018).
This module lists them and registers them with Django.
"""

from __future__ import annotations

from django.core import checks

from . import databases, jobs, leases, queues, routing, schedules, settings


def register() -> None:
    """Called from ``AppConfig.ready``; registering twice is harmless (Django keeps a set)."""
    checks.register(settings.check_settings, "leasejobs")
    checks.register(schedules.check_schedules_and_jobs, "leasejobs")
    checks.register(databases.check_databases, checks.Tags.database)
    leases.register()
    queues.register()
    jobs.register()
    schedules.register()
    routing.register()
