"""Settings for the demo and the test suite: the database comes from DATABASE_URL.

Default: a SQLite file beside this project, in WAL mode with a busy timeout and IMMEDIATE
transactions, so several worker processes can share it.
"""

import importlib.util
from pathlib import Path

import django
import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

SECRET_KEY = env("SECRET_KEY", default="leasejobs-testproject-not-secret")
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_leasejobs",
    "demo",
    "testapp",
    "benchmarks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "testproject.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"

DATABASE_URL = env.str("DATABASE_URL", default="") or f"sqlite:///{BASE_DIR / 'leasejobs.sqlite3'}"
DATABASES = {"default": env.db_url_config(DATABASE_URL)}
# Checks a machine silences on purpose (a comma-separated list: CI's PostgreSQL runs without
# autovacuum, leasejobs.W016, since its databases live minutes).
SILENCED_SYSTEM_CHECKS = env.list("SILENCED_SYSTEM_CHECKS", default=[])
_db = DATABASES["default"]
# Persistent, checked connections for the web side (admin, API, health view). The worker keeps
# its own between jobs whatever these say (docs/worker.md, "Connections"); benchmarks/settings.py
# puts Django's defaults back, as a user's project has them.
_db.setdefault("CONN_MAX_AGE", 60)
_db.setdefault("CONN_HEALTH_CHECKS", True)
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db.setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Tests use a file, not memory: worker subprocesses must see the same database.
    _db["TEST"] = {
        "NAME": env("TEST_SQLITE_NAME", default=str(BASE_DIR / "test-leasejobs.sqlite3"))
    }
elif _db["ENGINE"] == "django.db.backends.postgresql" and env.bool(
    "DATABASE_SERVER_SIDE_BINDING", default=False
):
    # Django's opt-in for psycopg 3: parameters bound on the server, statements prepared after
    # five runs. CI runs the PostgreSQL suite this way too; docs/databases.md has the figures.
    _db.setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 5})
elif _db["ENGINE"] in ("django.db.backends.mysql",):
    _db.setdefault("OPTIONS", {}).update({"charset": "utf8mb4"})
    _db["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"}
    # models.W037: MySQL/MariaDB ignore index conditions, so the two partial indexes are built
    # as plain ones. Acceptable (docs/databases.md): only running rows have a lease expiry, so
    # the plain lease index serves recovery's range as the partial one does; and MariaDB reads
    # the claimable rows through the (status, finished_at) index, never the finished ones.
    SILENCED_SYSTEM_CHECKS += ["models.W037"]

# A second queue database, for the tests of shards (LEASEJOBS_QUEUE_DATABASES, unset here):
# the same server, its own database (a second SQLite file). Nothing is written there unless a
# test asks for it; pytest-django creates its test database only for the tests that name it.
DATABASES["shard"] = {
    **{key: value for key, value in _db.items() if key != "TEST"},
    "NAME": (
        str(BASE_DIR / "leasejobs-shard.sqlite3")
        if _db["ENGINE"] == "django.db.backends.sqlite3"
        else f"{_db['NAME']}_shard"
    ),
    "TEST": {
        **_db.get("TEST", {}),
        **(
            {"NAME": env("TEST_SQLITE_SHARD_NAME", default=str(BASE_DIR / "test-shard.sqlite3"))}
            if _db["ENGINE"] == "django.db.backends.sqlite3"
            else {}
        ),
    },
}

# One job per minute, synced to the database at worker start or by `manage.py syncschedules`.
LEASEJOBS_SCHEDULES: dict[str, dict] = {
    "demo-every-minute": {
        "job": "demo.jobs.minute_report",
        "cron": "* * * * *",
        "timezone": "Europe/Paris",
        "misfire": "latest",
        "jitter": 5,
    },
}

# The HTTP API (docs/api.md) may enqueue these jobs, and those marked @job(api=True).
LEASEJOBS_API_JOBS = ["testapp.jobs.add", "testapp.jobs.record", "demo.jobs.minute_report"]

# The Django tasks framework (django.tasks on Django 6+, the django-tasks backport on 5.2) runs
# @task functions on this app's queue.
# "one_attempt" runs tasks once, as Django's own backends do (testapp.upstream_tasks uses it).
TASKS = {
    "default": {"BACKEND": "django_leasejobs.backends.LeaseJobsBackend"},
    "one_attempt": {
        "BACKEND": "django_leasejobs.backends.LeaseJobsBackend",
        "OPTIONS": {"max_attempts": 1},
    },
}
if django.VERSION < (6, 0) and importlib.util.find_spec("django_tasks") is not None:
    INSTALLED_APPS.append("django_tasks")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django_leasejobs": {
            "handlers": ["console"],
            "level": env("LEASEJOBS_LOG_LEVEL", default="WARNING"),
        },
        # The backport's log lines (task started / finished, with a failure's traceback);
        # Django's own "django.tasks" lines reach Django's console handler when DEBUG is on.
        "django_tasks": {
            "handlers": ["console"],
            "level": env("LEASEJOBS_LOG_LEVEL", default="WARNING"),
        },
    },
}
