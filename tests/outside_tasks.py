"""A ``django.tasks`` task outside every installed app: allowed only by LEASEJOBS_TASK_MODULES.

Imported by ``test_tasks_paths`` after it sets the setting: the backend checks a task's module
when the task is defined.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

_FRAMEWORK = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
task: Any = importlib.import_module(_FRAMEWORK).task


@task
def double(value: int) -> int:
    return value * 2
