"""Which Django tasks framework is installed: ``django.tasks`` (Django 6.0+) or the backport.

Django 6.0 ships ``django.tasks``; projects on Django 5.2 (and some on 6.x, Wagtail for one) use
the ``django-tasks`` backport (``import django_tasks``), which reads the same ``TASKS`` setting.
The backend and the worker reach whichever is present through this module, so nothing else
imports either package directly. ``django.tasks`` wins when both are installed.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

UNAVAILABLE = (
    "The Django tasks framework is not installed: use Django 6.0 or later (django.tasks), or on "
    "Django 5.2 install the backport with `pip install django-tasks` and add 'django_tasks' to "
    "INSTALLED_APPS."
)


@dataclass(frozen=True)
class Framework:
    """The names the backend needs, taken from one framework package."""

    package: str
    Task: Any
    TaskResult: Any
    TaskResultStatus: Any
    TaskContext: Any
    TaskError: Any
    BaseTaskBackend: Any
    InvalidTask: type[Exception]
    TaskResultDoesNotExist: type[Exception]
    task_enqueued: Any
    task_started: Any
    task_finished: Any
    task_backends: Any
    normalize_json: Any


def _load(package: str) -> Framework | None:
    try:
        root = importlib.import_module(package)
    except ImportError:
        return None
    base = importlib.import_module(f"{package}.base")
    backends_base = importlib.import_module(f"{package}.backends.base")
    exceptions = importlib.import_module(f"{package}.exceptions")
    signals = importlib.import_module(f"{package}.signals")
    if package == "django.tasks":
        normalize_json = importlib.import_module("django.utils.json").normalize_json
        invalid_task = exceptions.InvalidTask
    else:  # the backport names a few things differently
        normalize_json = importlib.import_module(f"{package}.utils").normalize_json
        invalid_task = exceptions.InvalidTaskError
    return Framework(
        package=package,
        Task=base.Task,
        TaskResult=base.TaskResult,
        TaskResultStatus=base.TaskResultStatus,
        TaskContext=base.TaskContext,
        TaskError=base.TaskError,
        BaseTaskBackend=backends_base.BaseTaskBackend,
        InvalidTask=invalid_task,
        TaskResultDoesNotExist=exceptions.TaskResultDoesNotExist,
        task_enqueued=signals.task_enqueued,
        task_started=signals.task_started,
        task_finished=signals.task_finished,
        task_backends=root.task_backends,
        normalize_json=normalize_json,
    )


@functools.cache
def installed() -> tuple[Framework, ...]:
    """Every framework that imports, ``django.tasks`` first."""
    return tuple(f for f in (_load("django.tasks"), _load("django_tasks")) if f is not None)


def get() -> Framework:
    """The framework the backend is built on; ImproperlyConfigured when there is none."""
    frameworks = installed()
    if not frameworks:
        raise ImproperlyConfigured(UNAVAILABLE)
    return frameworks[0]


def of(task: Any) -> Framework | None:
    """The framework whose ``Task`` class ``task`` is an instance of, if any."""
    for framework in installed():
        if isinstance(task, framework.Task):
            return framework
    return None
