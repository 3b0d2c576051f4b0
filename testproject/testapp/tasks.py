"""``django.tasks`` tasks the test suite enqueues through the LeaseJobsBackend.

Written exactly as Django's documentation shows (``@task``, ``context.attempt``), importing the
framework from Django 6 or, on Django 5.2, from the ``django-tasks`` backport.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from typing import Any

from django_leasejobs import Backoff

from .models import Hit

# django.tasks on Django 6, else (Django 5.2) the backport, which reads the same TASKS setting.
# Typed Any: django-stubs' overloads of @task do not list a backend's extra options.
_FRAMEWORK = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
task: Any = importlib.import_module(_FRAMEWORK).task

NO_WAIT = Backoff(base=0, cap=0, jitter="none")


@task
def add(a: int, b: int) -> int:
    return a + b


@task(priority=10, queue_name="default")
def important() -> str:
    return "important"


@task(takes_context=True)
def record(context: Any, label: str = "") -> int:
    """Records the attempt Django's TaskContext reports."""
    Hit.objects.create(job_id=int(context.task_result.id), attempt=context.attempt, label=label)
    return int(context.attempt)


@task(takes_context=True, max_attempts=5, backoff=NO_WAIT)
def flaky(context: Any, succeed_on: int = 3) -> str:
    if context.attempt < succeed_on:
        raise RuntimeError(f"flaky failure on attempt {context.attempt}")
    return f"ok on attempt {context.attempt}"


@task(takes_context=True, max_attempts=3, backoff=NO_WAIT)
def always_fails(context: Any) -> None:
    raise ValueError(f"boom on attempt {context.attempt}")


@task
async def async_add(a: int, b: int) -> int:
    return a + b


@task(takes_context=True)
async def async_record(context: Any, label: str) -> int:
    return int(context.attempt)


@task
def returns_object() -> Any:
    return object()


@task(takes_context=True)
def sleep(context: Any, seconds: float, label: str = "") -> None:
    """Sleeps, then records its run: a worker killed meanwhile leaves no record."""
    time.sleep(seconds)
    Hit.objects.create(job_id=int(context.task_result.id), attempt=context.attempt, label=label)


@task(takes_context=True, timeout=0.3, max_attempts=1)
def sleeps_past_timeout(context: Any, seconds: float = 0.8) -> None:
    """Sleeps past its own timeout, ignoring it, then records its run."""
    time.sleep(seconds)
    Hit.objects.create(job_id=int(context.task_result.id), attempt=context.attempt, label="late")


def plain_function() -> None:
    """Not a task: a row naming it must never call it."""
    Hit.objects.create(label="plain function ran")


NOT_A_TASK = "a string"


@task
async def async_thread_name() -> str:
    """Returns the name of the thread it ran on (the worker's event loop, for a worker)."""
    return threading.current_thread().name
