"""An unmigrated database fails fast: every command of the app exits at once naming
``manage.py migrate``; a database that is down is still waited for, as before.

Run in a project made by ``django-admin startproject`` (tests/newproject.py), on the test
run's database server with a new, empty database.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from ..newproject import (
    NewProject,
    create_empty_database,
    database_like_the_tests,
    drop_database,
    start_project,
)

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db]

COMMANDS = [
    ("runjobworker", "--burst"),
    ("jobstats",),
    ("checkjobs",),
    ("prunejobs", "--succeeded-older-than", "7d"),
    ("syncschedules",),
    ("jobqueue", "list"),
    ("deadletters", "groups"),
    ("canceljob", "1"),
    ("jobapitoken", "list"),
]


@pytest.fixture
def empty_project(tmp_path: Path) -> Iterator[NewProject]:
    if connection.vendor == "sqlite":
        yield start_project(tmp_path, database_like_the_tests(str(tmp_path / "db.sqlite3")))
        return
    name = f"leasejobs_unmigrated_{uuid.uuid4().hex[:8]}"
    create_empty_database(name)
    try:
        yield start_project(tmp_path, database_like_the_tests(name))
    finally:
        connection.close()
        drop_database(name)


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_exits_at_once_naming_migrate(empty_project: NewProject, command) -> None:
    done = empty_project.manage(*command, timeout=60)
    assert done.returncode != 0, done.stdout
    assert "has no django_leasejobs tables: run `python manage.py migrate` first." in done.stderr


def _latest_and_previous() -> tuple[str, str]:
    """The app's latest migration and the one it depends on (the numbers may have gaps)."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    (leaf,) = graph.leaf_nodes("django_leasejobs")
    (previous,) = [p for p in graph.node_map[leaf].parents if p.key[0] == "django_leasejobs"]
    return leaf[1], previous.key[1]


def test_a_database_behind_by_one_migration_is_named(empty_project: NewProject) -> None:
    latest, previous = _latest_and_previous()
    assert empty_project.manage("migrate", "django_leasejobs", previous).returncode == 0
    done = empty_project.manage("runjobworker", "--burst", timeout=60)
    assert done.returncode != 0
    assert f"lacks 1 django_leasejobs migration(s) ({latest})" in done.stderr
    check = empty_project.manage("check", "--database", "default")
    assert "leasejobs.W010" in check.stderr
    assert empty_project.manage("migrate").returncode == 0
    assert empty_project.manage("runjobworker", "--burst").returncode == 0
    assert "leasejobs.W010" not in empty_project.manage("check", "--database", "default").stderr


def test_a_database_that_is_down_is_waited_for(tmp_path: Path) -> None:
    """Nothing listens on the port: not an unmigrated database, so the worker keeps waiting
    (it is still running when the test stops it) and never speaks of migrating."""
    if connection.vendor == "sqlite":
        database = database_like_the_tests(str(tmp_path / "missing-dir" / "db.sqlite3"))
    else:
        database = {**database_like_the_tests("leasejobs"), "HOST": "127.0.0.1", "PORT": "1"}
    project = start_project(tmp_path, database)
    with pytest.raises(subprocess.TimeoutExpired) as waited:
        project.manage("runjobworker", "--burst", timeout=8)
    output = (waited.value.stderr or b"").decode() + (waited.value.stdout or b"").decode()
    assert "migrate" not in output
