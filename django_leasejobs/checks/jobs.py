"""System checks on jobs: those a worker could not find, parameters named like options, names
registered twice (``leasejobs.E006``) and ``LEASEJOBS_API_JOBS`` names not registered (``E010``;
these two run in the schedules' check, :mod:`.schedules`).

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
| ``leasejobs.E014`` | an ``@job(aliases=)`` entry is also a registered job's name, or two jobs \
list the same alias: rows under it would run on whichever the lookup meets |
| ``leasejobs.W014`` | a job registered at start whose module lies outside the installed apps' \
packages and ``LEASEJOBS_TASK_MODULES``: a worker has it only if its own start happens to \
import that module too, else its rows wait ``LEASEJOBS_UNKNOWN_JOB_GRACE`` (24 h), then die |
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.urls import get_resolver

from ..core import job_modules, registry
from ..core.conf import PREFIX, settings
from ..core.enqueue_options import option_parameters

Messages = list[checks.CheckMessage]


def register() -> None:
    """Called by ``checks.register``; tagged ``urls`` too, since it loads the URLconf."""
    checks.register(check_job_modules, "leasejobs", checks.Tags.urls)
    checks.register(check_option_parameters, "leasejobs")
    checks.register(check_aliases, "leasejobs")
    checks.register(check_outside_modules, "leasejobs")


def check_outside_modules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W014 for each job registered at start from a module no worker would import by itself
    (the late ones are W099's), naming the schedules that emit it."""
    try:
        declared = {name: spec.get("job") for name, spec in settings.SCHEDULES.items()}
        late = registry.registered_late()
    except (ImproperlyConfigured, AttributeError):
        return []  # a malformed setting is E001's or E003's
    messages: list[checks.CheckMessage] = []
    for name, spec in sorted(registry.registered().items()):
        module = spec.func.__module__
        if name in late or job_modules.allowed(module):
            continue
        emitting = sorted(s for s, job in declared.items() if job == name)
        if spec.schedule is not None and name not in declared:
            emitting.insert(0, f"{name} (@job(cron=...))")
        scheduled = f" (schedules: {', '.join(emitting)})" if emitting else ""
        messages.append(
            checks.Warning(
                f"Job {name!r}{scheduled} is defined in {module!r}, outside the installed apps' "
                f"packages and {PREFIX}TASK_MODULES: a worker runs it only if its own start "
                "imports that module as this process's did. If it does not, the job's rows "
                f"wait {PREFIX}UNKNOWN_JOB_GRACE (24 h by default), then are dead-lettered.",
                hint=f"Move the job into an installed app (its jobs.py is imported at start), "
                f"or add {module!r} to {PREFIX}TASK_MODULES.",
                obj=spec.func,
                id="leasejobs.W014",
            )
        )
    return messages


def check_aliases(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E014 for each alias that is also a registered name, or that two jobs claim."""
    messages: list[checks.CheckMessage] = []
    for alias, owners in registry.alias_conflicts().items():
        if alias in owners:
            others = [owner for owner in owners if owner != alias]
            problem = (
                f"{alias!r} is a registered job and also an alias of {', '.join(map(repr, others))}"
                ": rows of that name run on the registered job, never on the renamed one."
            )
            hint = (
                "Keep one: remove the old job's @job once the rename is deployed, or drop the "
                "alias (docs/deploying-changes.md#renaming-a-job)."
            )
        else:
            problem = (
                f"{alias!r} is an alias of several jobs ({', '.join(map(repr, owners))}): rows "
                "of that name would run on whichever is found first."
            )
            hint = "List an old name in the aliases of one job only."
        messages.append(checks.Error(problem, hint=hint, id="leasejobs.E014"))
    return messages


def check_option_parameters(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W011 for each job whose handler takes a parameter named like an enqueue option."""
    messages: list[checks.CheckMessage] = []
    for name, spec in sorted(registry.registered().items()):
        for parameter in option_parameters(spec):
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


def duplicate_jobs() -> Messages:
    """E006 for each job name two different functions are registered under."""
    return [
        checks.Error(
            f"Two different functions are registered as the job {name!r}; the last one "
            "imported wins, so which one runs depends on import order.",
            hint="Give one of them another name: @job(name=...).",
            id="leasejobs.E006",
        )
        for name in sorted(registry.duplicate_names())
    ]


def api_jobs() -> Messages:
    """A name the API may enqueue must be registered: a typo would otherwise be a silent 404."""
    try:
        names = settings.API_JOBS
    except ImproperlyConfigured:
        return []  # reported as leasejobs.E001
    return [
        checks.Error(
            f"{PREFIX}API_JOBS lists {name!r}, which is not a registered job.",
            hint="Use the job's registered name (its dotted path, or @job(name=...)), and "
            "define it with @job in a module the web process imports at start (an installed "
            "app's jobs.py).",
            id="leasejobs.E010",
        )
        for name in sorted(names)
        if registry.lookup(name) is None
    ]
