"""System checks on jobs: those a worker could not find, and parameters named like options.

A worker has the jobs its own start registered (app loading and every ``ready()``); for any
other name a row carries, it imports the name's module, only inside an installed app's package
or ``LEASEJOBS_TASK_MODULES`` (:mod:`.job_modules`). A job this process registered later (its
module imported by the URLconf or a view, not at start) that a worker cannot import that way
has every run dead-lettered as ``unregistered job``, while the web process enqueues it happily.

| id | what |
|---|---|
| ``leasejobs.W099`` | a job registered after app loading whose module a worker would not import |
| ``leasejobs.E099`` | a job registered after app loading whose name does not lead to its module |
| ``leasejobs.W011`` | a job's handler has a parameter named like an enqueue option (``priority``, \
``queue``, ``delay``, ...): ``fn.enqueue(..., priority=...)`` raises; use ``fn.using()`` |
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.urls import get_resolver

from .. import jobs
from ..core import job_modules, registry


def register() -> None:
    """Called by ``checks.register``; tagged ``urls`` too, since it loads the URLconf."""
    checks.register(check_job_modules, "leasejobs", checks.Tags.urls)
    checks.register(check_option_parameters, "leasejobs")


def check_option_parameters(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W011 for each job whose handler takes a parameter named like an enqueue option."""
    messages: list[checks.CheckMessage] = []
    for name, spec in sorted(registry.registered().items()):
        for parameter in jobs.option_parameters(spec):
            short = spec.func.__name__
            messages.append(
                checks.Warning(
                    f"Job {name!r} has a parameter named {parameter!r}, which is also an "
                    f"enqueue option: {short}.enqueue(..., {parameter}=...) raises TypeError, "
                    "since it cannot tell the argument from the option.",
                    hint=f"Set the option with {short}.using({parameter}=...).enqueue(...) and "
                    f"pass the argument with {short}.using().enqueue(..., {parameter}=...), "
                    "or rename the parameter.",
                    obj=spec.func,
                    id="leasejobs.W011",
                )
            )
    return messages


def check_job_modules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W099 and E099 for each job registered after app loading, the URLconf's included."""
    _load_urlconf()
    messages: list[checks.CheckMessage] = []
    for name, spec in sorted(registry.registered_late().items()):
        module = spec.func.__module__
        if not name.startswith(module + "."):
            messages.append(
                checks.Error(
                    f"Job {name!r} ({module}.{spec.func.__qualname__}) is registered only after "
                    f"app loading, and its name is not a dotted path into its module {module!r}: "
                    "a worker that meets the name imports the module the name points to, which "
                    "does not define it, so its jobs would be dead-lettered.",
                    hint="Drop name= (a job's default name is its dotted path), or define the "
                    "job in an installed app's jobs.py, which every process imports at start.",
                    id="leasejobs.E099",
                )
            )
            continue
        problem = job_modules.refusal(name)
        if problem:
            messages.append(
                checks.Warning(
                    f"Job {name!r} is registered only after app loading (its module is "
                    "imported by the URLconf or a view, not at start), and a worker would not "
                    f"import it to run a job: {problem}. Its jobs would be dead-lettered.",
                    hint=f"Define it with @job in an importable module of an installed app, "
                    f"or add {module!r} to LEASEJOBS_TASK_MODULES.",
                    id="leasejobs.W099",
                )
            )
    return messages


def _load_urlconf() -> None:
    """Import the URLconf, as Django's own URL check does, so the jobs its views' modules
    register are seen whatever order the checks run in. A broken URLconf is left to
    Django's check, which reports it."""
    if not getattr(django_settings, "ROOT_URLCONF", None):
        return
    try:
        get_resolver().url_patterns  # noqa: B018 (the import is the point)
    except Exception:
        return
