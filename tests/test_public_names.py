"""The public homes of the names the docs import: the same objects as the layers' own.

``django_leasejobs`` gives ``Worker`` and ``JobContext`` on first use (their modules import the
models, which the package must not do while Django loads its apps); ``operations`` and
``schedules`` are thin modules over the layer folders, which are internal
(docs/architecture.md). Each public name is the internal object itself, not a copy or a
wrapper, so the old paths and the new ones can never disagree.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import django_leasejobs
from django_leasejobs import operations, schedules, upkeep
from django_leasejobs.core import occurrences as core_occurrences
from django_leasejobs.models import databases
from django_leasejobs.protocol import cancels, operator_actions, pauses
from django_leasejobs.reports import occurrences as reports_occurrences
from django_leasejobs.runtime import context, worker
from django_leasejobs.runtime import schedules as runtime_schedules
from django_leasejobs.upkeep import schedule_sync

from .test_architecture import ROOT


def test_worker_and_job_context_are_top_level_names() -> None:
    from django_leasejobs import JobContext, Worker

    assert Worker is worker.Worker
    assert JobContext is context.JobContext
    assert {"Worker", "JobContext"} <= set(django_leasejobs.__all__)
    assert {"Worker", "JobContext", "job", "operations"} <= set(dir(django_leasejobs))


def test_an_unknown_top_level_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Wroker'"):
        django_leasejobs.Wroker  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'Wroker'"):
        from django_leasejobs import Wroker  # noqa: F401


def test_importing_the_package_loads_no_worker_and_no_model() -> None:
    """``INSTALLED_APPS`` imports the package before the app registry is ready."""
    code = (
        "import sys, django_leasejobs\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(("
        "'django_leasejobs.runtime', 'django_leasejobs.models')))\n"
        "assert loaded == [], loaded\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("public", "internal"),
    [
        (operations, [cancels, operator_actions, pauses, upkeep, databases]),
        (
            schedules,
            [core_occurrences, reports_occurrences, runtime_schedules, schedule_sync],
        ),
    ],
    ids=["operations", "schedules"],
)
def test_each_name_of_a_public_module_is_the_layer_s_own(public, internal) -> None:
    for name in public.__all__:
        homes = [module for module in internal if hasattr(module, name)]
        assert homes, f"{public.__name__}.{name} comes from none of {internal}"
        assert all(getattr(public, name) is getattr(home, name) for home in homes), name
    assert sorted(public.__all__) == sorted(
        # (pytest rewrites the package's asserts, a plugin's, adding names that are no identifier)
        name
        for name in vars(public)
        if name.isidentifier() and not name.startswith("_")
    ), f"{public.__name__} exports what it imports, nothing else"


def test_the_names_the_docs_call_have_a_public_home() -> None:
    assert {"cancel", "request_cancel", "Cancel", "replay", "run_now", "retry_now"} <= set(
        operations.__all__
    )
    assert {"pause", "resume", "paused", "Paused", "prune_limiters"} <= set(operations.__all__)
    assert {
        "next_occurrences",
        "occurrences_between",
        "occurrence_history",
        "history_of",
        "tick",
        "sync_from_settings",
        "declared_in_code",
        "validate_schedule_spec",
    } <= set(schedules.__all__)
