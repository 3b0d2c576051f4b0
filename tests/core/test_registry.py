"""The registry: what a name finds, what a worker may import to find it, and what it says.

``tests.late_jobs`` is outside every installed app and nothing imports it at start, so each
test imports it (or not) afresh: the fixture restores the registry and ``sys.modules``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from django_leasejobs.core import job_modules, registry
from django_leasejobs.errors import UnknownJobError

from ..conftest import LATE_JOBS as LATE
from ..conftest import forget_module

BROKEN = "tests.late_broken"


@pytest.fixture(autouse=True)
def fresh(late_jobs: str) -> Iterator[None]:
    """``tests.late_jobs`` (and ``tests.late_broken``) not imported; the registry restored."""
    forget_module(BROKEN)
    yield
    forget_module(BROKEN)


def test_get_never_imports_and_says_what_to_do(settings: Any) -> None:
    settings.LEASEJOBS_TASK_MODULES = [LATE]
    with pytest.raises(UnknownJobError) as unknown:
        registry.get(f"{LATE}.late_report")
    assert LATE not in sys.modules
    assert str(unknown.value) == (
        f"No job is registered as 'tests.late_jobs.late_report'. {job_modules.JOB_ADVICE}"
    )
    assert "LEASEJOBS_TASK_MODULES" in job_modules.JOB_ADVICE
    assert "@job in an importable module of an installed app" in job_modules.JOB_ADVICE


def test_find_imports_a_module_the_allow_list_names(settings: Any) -> None:
    settings.LEASEJOBS_TASK_MODULES = [LATE]
    spec = registry.find(f"{LATE}.late_report")
    assert spec.func("monday") == "report for monday"
    assert registry.find(f"{LATE}.Reports.weekly").func() == "weekly"
    assert f"{LATE}.late_report" in registry.registered_late()


@pytest.mark.parametrize("name", ["os.system", "subprocess.run", "tests.late_jobs.late_report"])
def test_find_refuses_a_module_outside_the_allow_list(name: str) -> None:
    with pytest.raises(UnknownJobError) as unknown:
        registry.find(name)
    assert unknown.value.problem == (
        f"its module {name.rpartition('.')[0]!r} is outside the installed apps' packages and "
        "LEASEJOBS_TASK_MODULES; nothing was imported"
    )
    assert str(unknown.value).endswith(job_modules.JOB_ADVICE)


@pytest.mark.parametrize("module", ["this", LATE])  # importing ``this`` prints the Zen of Python
def test_find_imports_nothing_for_a_module_outside_the_allow_list(module: str, capsys: Any) -> None:
    forget_module(module)
    with pytest.raises(UnknownJobError):
        registry.find(f"{module}.late_report")
    assert module not in sys.modules
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("testapp.nowhere.report", "there is no module 'testapp.nowhere'"),
        ("testapp.jobs.nope", "importing 'testapp.jobs' registered no job of that name"),
        (
            f"{BROKEN}.report",
            "importing 'tests.late_broken' failed: RuntimeError: the reports service is not "
            "configured",
        ),
        ("testapp.__main__.report", "a module named '__main__' is not allowed"),
        ("testapp.jobs.add\n", "it is not a dotted path to a module's function"),
    ],
)
def test_find_says_why_a_name_in_the_allow_list_is_still_unknown(
    settings: Any, name: str, problem: str
) -> None:
    settings.LEASEJOBS_TASK_MODULES = [BROKEN]
    with pytest.raises(UnknownJobError) as unknown:
        registry.find(name)
    assert unknown.value.problem.startswith(problem)
    assert str(unknown.value).endswith(job_modules.JOB_ADVICE)
    assert unknown.value.advice == job_modules.JOB_ADVICE


def test_a_name_that_is_not_its_module_path_is_not_found_by_importing(settings: Any) -> None:
    settings.LEASEJOBS_TASK_MODULES = ["tests"]
    with pytest.raises(UnknownJobError) as unknown:
        registry.find("tests.renamed_report")
    assert unknown.value.problem == "importing 'tests' registered no job of that name"


def test_the_allow_list_is_matched_by_whole_package_names(settings: Any) -> None:
    settings.LEASEJOBS_TASK_MODULES = ["tests.late"]  # not "tests.late_jobs"
    with pytest.raises(UnknownJobError, match="outside the installed apps' packages"):
        registry.find(f"{LATE}.late_report")
    assert LATE not in sys.modules
