"""Which modules a worker may import to find the job or task that a row names.

A row's name is data, and importing a module runs its top level (``this`` prints, a
``__main__`` runs a program). So a worker imports a name's module only when it lies inside an
installed app's package or ``LEASEJOBS_TASK_MODULES``, and never imports anything for any
other name. What the process registered while loading the project (app loading and every
``ready()``) needs no import here: it is trusted wherever its module lives.
"""

from __future__ import annotations

import importlib
import re

from django.apps import apps

from .conf import settings

JOB_ADVICE = (
    "Define it with @job in an importable module of an installed app (or add its module to "
    "LEASEJOBS_TASK_MODULES), and run that code on the workers."
)
"""What to do about a job name no worker can run: every message about one ends with it."""

TASK_ADVICE = (
    "Define the task in a module of an installed app or one the project imports at start (or "
    "add its module to LEASEJOBS_TASK_MODULES), and run that code on the workers."
)
"""The same for a ``django.tasks`` task path."""

_DOTTED_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
"""Matched whole (``fullmatch``): with ``$``, a path ending in a newline would pass."""


def allowed_packages() -> list[str]:
    """The installed apps' packages and ``LEASEJOBS_TASK_MODULES``, in that order."""
    return [config.name for config in apps.get_app_configs()] + list(settings.TASK_MODULES)


def allowed(module: str) -> bool:
    """Whether ``module`` lies inside an installed app's package or ``LEASEJOBS_TASK_MODULES``."""
    return any(module == p or module.startswith(p + ".") for p in allowed_packages())


def refusal(path: str) -> str | None:
    """Why a worker may not import ``path``'s module (a clause); ``None`` when it may.

    ``__main__``-style modules are refused even inside an app: they are programs, not
    libraries.
    """
    module = path.rpartition(".")[0]
    if not module or not _DOTTED_PATH.fullmatch(path):
        return "it is not a dotted path to a module's function"
    if not allowed(module):
        return (
            f"its module {module!r} is outside the installed apps' packages and "
            "LEASEJOBS_TASK_MODULES"
        )
    dunder = next((p for p in module.split(".") if p.startswith("__") and p.endswith("__")), None)
    if dunder:
        return f"a module named {dunder!r} is not allowed (a program, not a library)"
    return None


def load(path: str) -> str | None:
    """Import ``path``'s module if a worker may; why nothing was found (a clause), or ``None``.

    ``None`` means the module imported: the caller looks the name up again. A module that does
    not exist names the missing part (its parents were imported: ``module.Class.method``
    paths are found that way); any error the module raises on import is given back, not raised.
    """
    refused = refusal(path)
    if refused:
        return f"{refused}; nothing was imported"
    module = path.rpartition(".")[0]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return f"there is no module {exc.name!r}"
        return f"importing {module!r} failed: {type(exc).__name__}: {exc}"
    except Exception as exc:
        return f"importing {module!r} failed: {type(exc).__name__}: {exc}"
    return None
