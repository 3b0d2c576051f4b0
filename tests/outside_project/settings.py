"""Settings of the project these tests stand for, when they run outside this repository
(``bash .ci/run wheel``: against the built wheel, installed as a user installs it)."""

import os
from pathlib import Path

SECRET_KEY = "outside-project-not-secret"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_leasejobs",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("OUTSIDE_DB", str(Path(__file__).parent / "db.sqlite3")),
        "TEST": {"NAME": os.environ.get("OUTSIDE_TEST_DB", "")},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TASKS = {"default": {"BACKEND": "django_leasejobs.backends.LeaseJobsBackend"}}
try:  # the django-tasks backport on Django 5.2 reads TASKS as an installed app
    import django_tasks  # noqa: F401

    INSTALLED_APPS.append("django_tasks")
except ImportError:
    pass
