"""A row cannot make the worker import an arbitrary module (issue 15, item 3).

A ``django.tasks`` row names its task by dotted path. The worker resolves a task defined while
the project loaded wherever it lives (tests/acceptance/test_project_modules.py starts such a
project), any other only inside the packages of installed apps or ``LEASEJOBS_TASK_MODULES``;
anything else is dead-lettered as ``not a task`` without importing it.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from django.core.checks import Error

from django_leasejobs import protocol
from django_leasejobs.checks.settings import check_settings
from django_leasejobs.core import job_modules
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import execution

try:
    from django.tasks.exceptions import InvalidTask
except ImportError:  # Django 5.2: the backport
    pytest.importorskip("django_tasks")
    from django_tasks.exceptions import InvalidTaskError as InvalidTask

pytestmark = pytest.mark.django_db


OUTSIDE = "tests.outside_tasks"
"""A module of tasks that belongs to no installed app."""


def outside() -> Any:
    """``tests.outside_tasks``, imported now (its ``@task`` is checked when it is defined)."""
    return importlib.import_module(OUTSIDE)


def run_one() -> Outcome:
    claimed = protocol.claim("w1", batch=1)
    assert len(claimed) == 1, claimed
    return execution.run(claimed[0], "w1")


def row(path: str) -> Job:
    return protocol.enqueue_task(path, [], {}, task_backend="default")


@pytest.mark.parametrize(
    ("path", "module"),
    [
        ("this.x", "this"),  # importing it prints the Zen of Python
        ("unittest.__main__.x", "unittest.__main__"),  # runs unittest's command line
    ],
)
def test_a_path_outside_installed_apps_is_refused_without_importing_it(
    path: str, module: str, capsys: Any
) -> None:
    sys.modules.pop(module, None)
    job = row(path)
    assert run_one() == Outcome.DEAD
    assert module not in sys.modules
    assert capsys.readouterr().out == ""
    assert DeadLetter.objects.get(job=job).reason == "not a task"
    last_error = Job.objects.get(pk=job.pk).last_error
    assert path in last_error
    assert "LEASEJOBS_TASK_MODULES" in last_error


def test_a_dunder_module_of_an_installed_app_is_refused() -> None:
    job = row("django_leasejobs.__main__.x")  # a __main__ module runs a program on import
    assert run_one() == Outcome.DEAD
    assert "django_leasejobs.__main__" not in sys.modules
    assert DeadLetter.objects.get(job=job).reason == "not a task"
    assert "'__main__' is not allowed" in Job.objects.get(pk=job.pk).last_error


def test_a_path_with_a_trailing_newline_is_not_a_dotted_path() -> None:
    job = row("testapp.tasks.add\n")
    assert run_one() == Outcome.DEAD
    assert DeadLetter.objects.get(job=job).reason == "not a task"
    last_error = Job.objects.get(pk=job.pk).last_error
    assert "Task path 'testapp.tasks.add\\n': it is not a dotted path" in last_error


def test_a_task_outside_installed_apps_is_defined_then_refused_at_enqueue() -> None:
    """Defining it raises nothing: a module that defines tasks imports (a library's tasks,
    loaded by its app at start, live outside the app packages). One defined after the project
    loaded, which a worker would not import, is refused at enqueue, saying what to do."""
    sys.modules.pop(OUTSIDE, None)
    try:
        module = outside()
        with pytest.raises(InvalidTask) as refused:
            module.double.enqueue(1)
    finally:
        sys.modules.pop(OUTSIDE, None)
    assert str(refused.value) == (
        "A worker would not run this task. Task path 'tests.outside_tasks.double': its module "
        "'tests.outside_tasks' is outside the installed apps' packages and "
        "LEASEJOBS_TASK_MODULES, and the task was not defined while the project loaded. "
        f"{job_modules.TASK_ADVICE}"
    )
    assert not Job.objects.exists()


def test_a_task_outside_the_allowed_modules_is_refused_at_enqueue(settings) -> None:
    settings.LEASEJOBS_TASK_MODULES = ["tests.outside_tasks"]
    module = outside()
    settings.LEASEJOBS_TASK_MODULES = []
    with pytest.raises(InvalidTask, match="LEASEJOBS_TASK_MODULES"):
        module.double.enqueue(1)
    assert not Job.objects.exists()


def test_a_marked_row_outside_the_allowed_modules_never_runs() -> None:
    job = row(f"{OUTSIDE}.double")
    assert run_one() == Outcome.DEAD
    assert Job.objects.get(pk=job.pk).status == Status.DEAD
    assert DeadLetter.objects.get(job=job).reason == "not a task"


def test_leasejobs_task_modules_allows_a_package_and_its_submodules(settings) -> None:
    settings.LEASEJOBS_TASK_MODULES = ["tests"]
    result = outside().double.enqueue(21)
    assert run_one() == Outcome.SUCCEEDED
    result.refresh()
    assert result.return_value == 42


def test_a_prefix_is_a_whole_package_name(settings) -> None:
    settings.LEASEJOBS_TASK_MODULES = ["tests"]
    module = outside()
    settings.LEASEJOBS_TASK_MODULES = ["test"]  # not "tests"
    with pytest.raises(InvalidTask, match="LEASEJOBS_TASK_MODULES"):
        module.double.enqueue(1)


@pytest.mark.parametrize("value", ["tests", ["tests", ""], ["no spaces"], [1]])
def test_a_bad_leasejobs_task_modules_is_a_settings_error(settings, value: Any) -> None:
    settings.LEASEJOBS_TASK_MODULES = value
    errors = [m for m in check_settings() if isinstance(m, Error)]
    assert [m.id for m in errors] == ["leasejobs.E001"]
    assert "LEASEJOBS_TASK_MODULES" in errors[0].msg
