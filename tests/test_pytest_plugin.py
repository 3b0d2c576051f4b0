"""The pytest plugin is registered under ``pytest11`` and is inert without pytest-django."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

BLOCKED = """
import sys

sys.modules["pytest_django"] = None  # as if it were not installed
import django_leasejobs.pytest_plugin as plugin
print(sorted(name for name in vars(plugin) if name.startswith("leasejobs")))
"""


def test_registered_as_a_pytest11_entry_point() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins["django_leasejobs"] == "django_leasejobs.pytest_plugin"


def test_defines_no_fixture_without_pytest_django() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_defines_its_fixtures_with_pytest_django() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED.replace('sys.modules["pytest_django"] = None', "")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "['leasejobs', 'leasejobs_worker']"
