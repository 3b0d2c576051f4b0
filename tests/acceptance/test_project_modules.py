"""Where a project's jobs and tasks may live, through real processes of a project outside the repo.

The project is written into a temporary folder: ``shop`` (settings, an empty URLconf), the apps
``shop.orders`` and ``shop.search``, and ``searchlib``, a library package outside every app
whose ``AppConfig`` ``shop.search`` subclasses and whose ``ready()`` imports its tasks (as
Wagtail's search app does with ``modelsearch``). A "web" process (``manage.py shell -c``)
imports what it uses and enqueues; ``manage.py runjobworker --burst`` runs what is due. Both
use the test database.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import django
import pytest
from django.db import connection

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job, Status

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ONE_DAY = dt.timedelta(days=1, seconds=1)
ADVICE = "LEASEJOBS_TASK_MODULES"
"""Every message about a name a worker cannot run says what to do, naming this setting."""

FRAMEWORKS = [
    name
    for name, present in (
        ("django.tasks", django.VERSION >= (6, 0)),
        ("django_tasks", importlib.util.find_spec("django_tasks") is not None),
    )
    if present
]
"""The tasks frameworks this run can use: django.tasks on Django 6, the backport if installed."""

FILES = {
    "manage.py": """
        import os, sys
        from django.core.management import execute_from_command_line
        os.environ["DJANGO_SETTINGS_MODULE"] = "shop.settings"
        execute_from_command_line(sys.argv)
    """,
    "shop/__init__.py": "",
    "shop/urls.py": "urlpatterns = []\n",
    "shop/orders/__init__.py": "",
    "shop/orders/flow.py": """
        # Not jobs.py: imported by the code that uses it (a view, a signal), not at start.
        from django_leasejobs import job

        @job
        def daily_report(day):
            return f"report for {day}"
    """,
    "shop/sidecar.py": """
        # Outside every app: a worker must never import it, whatever a row says.
        from pathlib import Path
        Path(__file__).with_name("sidecar-imported").touch()

        from django_leasejobs import job

        @job
        def tidy():
            return "tidied"
    """,
    "shop/search/__init__.py": "",
    "shop/search/apps.py": """
        from searchlib.apps import SearchLibConfig

        class SearchConfig(SearchLibConfig):
            name = "shop.search"
            label = "shop_search"
    """,
    "searchlib/__init__.py": "",
    "searchlib/apps.py": """
        from django.apps import AppConfig

        class SearchLibConfig(AppConfig):
            name = "searchlib"

            def ready(self):
                from . import tasks  # noqa: F401  (defines the library's tasks at start)
    """,
    "searchlib/tasks.py": """
        from {framework} import task

        @task
        def index_object(pk):
            return f"indexed {pk}"
    """,
    "searchlib/other.py": """
        # Never imported at start: a row naming it is refused without importing it.
        from pathlib import Path
        Path(__file__).with_name("other-imported").touch()

        from {framework} import task

        @task
        def reindex():
            return "reindexed"
    """,
}


@dataclass
class Project:
    root: Path

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,  # bounds a hang only
            check=False,
        )

    def web(self, code: str) -> str:
        """Run ``code`` in a process of the project, as a web request would; the last word it
        printed (``shell`` may print a line of its own first)."""
        ran = self.manage("shell", "-c", textwrap.dedent(code))
        assert ran.returncode == 0, ran.stderr
        return ran.stdout.split()[-1]

    def burst(self) -> subprocess.CompletedProcess[str]:
        ran = self.manage("runjobworker", "--burst", "--no-scheduler", "--concurrency", "1")
        assert ran.returncode == 0, ran.stderr
        return ran


def the_test_database() -> dict[str, Any]:
    s = connection.settings_dict
    keys = ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")
    return {k: s[k] for k in keys if s.get(k) is not None}


def write_project(root: Path, framework: str | None) -> Project:
    """The shop; with ``framework`` (whose ``@task`` the library uses), its search app too."""
    for path, text in FILES.items():
        if framework is None and path.startswith(("searchlib/", "shop/search/")):
            continue
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).replace("{framework}", framework or ""))
    apps = [
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django_leasejobs",
        "shop.orders",
    ]
    if framework is not None:
        apps.append("shop.search.apps.SearchConfig")
    if django.VERSION < (6, 0) and importlib.util.find_spec("django_tasks") is not None:
        apps.append("django_tasks")  # the backport, as on a Django 5.2 site
    (root / "shop" / "settings.py").write_text(
        textwrap.dedent(
            f"""
            SECRET_KEY = "not-secret"
            USE_TZ = True
            ROOT_URLCONF = "shop.urls"
            INSTALLED_APPS = {apps!r}
            DATABASES = {{"default": {the_test_database()!r}}}
            TASKS = {{"default": {{"BACKEND": "django_leasejobs.backends.LeaseJobsBackend"}}}}
            """
        )
    )
    return Project(root)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return write_project(tmp_path, None)


@pytest.fixture(params=FRAMEWORKS)
def library_project(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    """The shop with its search app, whose library declares tasks with ``request.param``."""
    return write_project(tmp_path, request.param)


def test_a_job_outside_jobs_py_runs_on_a_worker_that_never_imported_it(project: Project) -> None:
    job_id = project.web(
        """
        from shop.orders.flow import daily_report
        print(daily_report.enqueue("monday").pk)
        """
    )
    project.burst()
    job = Job.objects.get(pk=int(job_id))
    assert (job.status, job.result, job.last_error) == (Status.SUCCEEDED, "report for monday", "")


def test_a_job_outside_every_app_is_never_imported_by_a_worker(project: Project) -> None:
    job = Job.objects.create(name="shop.sidecar.tidy")
    project.burst()  # it waits for a worker that can run it ...
    assert not (project.root / "shop" / "sidecar-imported").exists()
    job.refresh_from_db()
    assert (job.status, job.deferrals) == (Status.PENDING, 1)
    # ... until LEASEJOBS_UNKNOWN_JOB_GRACE (a day) has passed since its first deferral.
    Job.objects.filter(pk=job.pk).update(
        run_at=job.first_deferred_at, first_deferred_at=job.first_deferred_at - ONE_DAY
    )
    project.burst()
    assert not (project.root / "shop" / "sidecar-imported").exists()
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert DeadLetter.objects.get(job=job).reason == "unregistered job"
    assert "No job is registered as 'shop.sidecar.tidy'; it was not run" in job.last_error
    assert "'shop.sidecar' is outside the installed apps' packages" in job.last_error
    assert ADVICE in job.last_error


def test_a_library_task_loaded_at_start_is_trusted_where_it_lives(
    library_project: Project,
) -> None:
    """Wagtail's case: an app's ``ready()`` (from a library's AppConfig) imports the library's
    tasks, outside every app package; the project starts, enqueues and runs them."""
    checked = library_project.manage("check")
    assert checked.returncode == 0, checked.stderr
    result_id = library_project.web(
        """
        from searchlib.tasks import index_object
        print(index_object.enqueue(7).id)
        """
    )
    library_project.burst()
    job = Job.objects.get(pk=int(result_id))
    assert (job.status, job.result) == (Status.SUCCEEDED, "indexed 7")


def test_a_library_module_not_loaded_at_start_is_refused_without_importing_it(
    library_project: Project,
) -> None:
    job = protocol.enqueue_task("searchlib.other.reindex", [], {}, task_backend="default")
    library_project.burst()
    assert not (library_project.root / "searchlib" / "other-imported").exists()
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert DeadLetter.objects.get(job=job).reason == "not a task"
    assert "'searchlib.other.reindex'" in job.last_error
    assert ADVICE in job.last_error
