"""Settings for benchmark subprocesses: the test project's, tuned for measuring.

``DEBUG`` is off (Django would otherwise keep every query in memory), and the django-tasks
database backend is installed when the ``benchmark`` extra is, so its worker can run the peer
workload in the same scratch database. The database connection has Django's defaults, as
``startproject`` leaves them (``CONN_MAX_AGE = 0``, no health checks), so the figures are the
ones a user gets; ``BENCHMARK_CONN_MAX_AGE`` sets ``CONN_MAX_AGE`` for the worker section's
comparison, ``BENCHMARK_RETENTION`` the retention and history sections'
``LEASEJOBS_RETENTION``, and ``BENCHMARK_LIBRARY`` the folder of another commit's library
(``benchmark --baseline``);
``BENCHMARK_STARTPROJECT`` turns on what ``startproject`` writes (``DEBUG``, no ``LOGGING``),
``BENCHMARK_OTEL`` sets OpenTelemetry up for the observability section (benchmarks.otel_setup),
and ``BENCHMARK_QUEUE_DATABASES`` the shards section's ``LEASEJOBS_QUEUE_DATABASES`` (JSON).
"""

import os
import sys
from importlib.util import find_spec
from typing import Any, cast

# ``benchmark --baseline REF``: this process runs the library of another commit, unpacked in
# this folder (benchmarks.baseline). Settings load before any app, so the library is not yet
# imported and comes from there.
if os.environ.get("BENCHMARK_LIBRARY"):
    sys.path.insert(0, os.environ["BENCHMARK_LIBRARY"])

from benchmarks import otel_setup

# Before anything imports opentelemetry (the library does when its apps load).
otel_setup.configure(os.environ.get("BENCHMARK_OTEL", "api"))

from testproject.settings import *  # noqa: E402, F403
from testproject.settings import DATABASES, INSTALLED_APPS, env  # noqa: E402
from testproject.settings import LOGGING as PROJECT_LOGGING  # noqa: E402

DEBUG = False
# The observability section: its job's INFO line is made (a logger at INFO, no handler of its
# own), and kept by each job's own logs unless BENCHMARK_JOB_LOGS is "off".
_loggers = cast(dict[str, Any], PROJECT_LOGGING["loggers"])
LOGGING = {**PROJECT_LOGGING, "loggers": {**_loggers, "testapp.bench": {"level": "INFO"}}}
# The worker section's ``startproject`` drain: the settings ``django-admin startproject`` writes
# where they differ from these (DEBUG on, no LOGGING: Django's default logging).
if env.bool("BENCHMARK_STARTPROJECT", default=False):
    DEBUG = True
    LOGGING = {}
LEASEJOBS_NOTIFY = env.bool("BENCHMARK_NOTIFY", default=True)
_job_logs = env.str("BENCHMARK_JOB_LOGS", default="on")
if _job_logs in {"off", "floor"}:
    LEASEJOBS_JOB_LOGS = None
if _job_logs == "floor":
    LOGGING = {
        **LOGGING,
        "handlers": {
            **cast(dict[str, Any], LOGGING.get("handlers", {})),
            "floor": {"class": "benchmarks.log_floor.KeepFields"},
        },
        "loggers": {
            **cast(dict[str, Any], LOGGING.get("loggers", {})),
            "testapp.bench": {"level": "INFO", "handlers": ["floor"]},
        },
    }
# The retention and history sections set it (a JSON object); no retention otherwise.
LEASEJOBS_RETENTION = env.json("BENCHMARK_RETENTION", default={})
# The shards section routes a queue to the "shard" alias (the scratch database's name with
# "_shard", on the same server); no routes otherwise.
LEASEJOBS_QUEUE_DATABASES = env.json("BENCHMARK_QUEUE_DATABASES", default={})
# New dicts: the test project's own stay as they are wherever this module is imported. The
# shard's connection is set as the default's, so the two sides of the shards section differ
# in nothing else.
_connection = {
    "CONN_MAX_AGE": env.int("BENCHMARK_CONN_MAX_AGE", default=0),
    "CONN_HEALTH_CHECKS": False,
}
DATABASES = {
    **DATABASES,
    "default": {**DATABASES["default"], **_connection},
    "shard": {**DATABASES["shard"], **_connection},
}

# The demo app is not measured, and ``--baseline`` loads every installed app with another
# commit's library: only the apps the sections use, which keep to names every commit has.
INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "demo"]
LEASEJOBS_SCHEDULES = {}
LEASEJOBS_API_JOBS = ["testapp.jobs.add", "testapp.jobs.record"]

PEER_INSTALLED = find_spec("django_tasks_db") is not None
if PEER_INSTALLED:
    INSTALLED_APPS = [
        *INSTALLED_APPS,
        *[app for app in ("django_tasks", "django_tasks_db") if app not in INSTALLED_APPS],
    ]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
