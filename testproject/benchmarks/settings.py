"""Settings for benchmark subprocesses: the test project's, tuned for measuring.

``DEBUG`` is off (Django would otherwise keep every query in memory), and the django-tasks
database backend is installed when the ``benchmark`` extra is, so its worker can run the peer
workload in the same scratch database.
"""

from importlib.util import find_spec

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS, env

DEBUG = False
LEASEJOBS_NOTIFY = env.bool("BENCHMARK_NOTIFY", default=True)

PEER_INSTALLED = find_spec("django_tasks_db") is not None
if PEER_INSTALLED:
    INSTALLED_APPS = [
        *INSTALLED_APPS,
        *[app for app in ("django_tasks", "django_tasks_db") if app not in INSTALLED_APPS],
    ]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
