"""Tasks shaped like those of Django's own ``tests/tasks/tasks.py``, on a one-attempt backend.

The suite mirrors the assertions of Django's tasks tests against these, run by a real
``runjobworker``. They use the ``one_attempt`` alias (``OPTIONS={"max_attempts": 1}``), so a
failure ends the task at once, as on Django's own backends.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

_FRAMEWORK = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
task: Any = importlib.import_module(_FRAMEWORK).task

BACKEND = "one_attempt"


@task(backend=BACKEND)
def noop_task(*args: Any, **kwargs: Any) -> None:
    return None


@task(backend=BACKEND)
async def noop_task_async(*args: Any, **kwargs: Any) -> None:
    return None


@task(backend=BACKEND)
def calculate_meaning_of_life() -> int:
    return 42


@task(backend=BACKEND)
def failing_task_value_error() -> None:
    raise ValueError("This Task failed due to ValueError")


@task(backend=BACKEND)
def failing_task_system_exit() -> None:
    raise SystemExit("This Task failed due to SystemExit")


@task(backend=BACKEND)
def exit_task() -> None:
    sys.exit(1)


@task(backend=BACKEND)
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task(backend=BACKEND)
def complex_return_value() -> Any:
    """A value that is neither JSON nor picklable."""
    return lambda: True


@task(backend=BACKEND, takes_context=True)
def get_task_id(context: Any) -> str:
    return str(context.task_result.id)


@task(backend=BACKEND, takes_context=True)
def context_attempt(context: Any, attempt: int) -> None:
    """Django's ``test_context`` task: the context is a TaskContext on the given attempt."""
    assert type(context).__name__ == "TaskContext"
    assert context.attempt == attempt
