"""A ``django.tasks`` task of the shop (enqueued through the app's TASKS backend).

Allowed to run by ``LEASEJOBS_TASK_MODULES`` (the shop is not an installed app here), which the
tests set before they import this module.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

_FRAMEWORK = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
task: Any = importlib.import_module(_FRAMEWORK).task


@task
def restock(sku: str, count: int) -> str:
    return f"{count} x {sku}"
