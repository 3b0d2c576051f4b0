"""A project made as a new user makes one: ``django-admin startproject``, outside the repo.

Its settings are Django's own (``CONN_MAX_AGE = 0``, no LOGGING), with ``django_leasejobs``
added to ``INSTALLED_APPS`` and ``DATABASES`` pointed where a test says. Commands run in a
subprocess, as ``python manage.py ...`` from the project's folder; the project's own code
(``notify/probe.py``) reads back what the test process cannot see. ``startproject`` runs once per
test run and project name; each test gets a fresh copy of its output.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection


@dataclass
class NewProject:
    root: Path

    def manage(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``python manage.py *args``; raises ``TimeoutExpired`` if it runs past ``timeout``."""
        env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


_STARTED: dict[str, Path] = {}
"""What ``startproject`` wrote for each project name, in this run: copied, never changed."""


def _started(name: str) -> Path:
    if name not in _STARTED:
        folder = Path(tempfile.mkdtemp(prefix=f"startproject-{name}-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "django", "startproject", name, str(folder)],
            check=True,
            capture_output=True,
        )
        _STARTED[name] = folder
    return _STARTED[name]


def start_project(directory: Path, database: dict[str, Any], name: str = "shop") -> NewProject:
    """``django-admin startproject name`` in ``directory``, using ``database`` as default."""
    shutil.copytree(_started(name), directory, dirs_exist_ok=True)
    settings = directory / name / "settings.py"
    settings.write_text(
        settings.read_text()
        + "\nINSTALLED_APPS += ['django_leasejobs']\n"
        + f"DATABASES = {{'default': {database!r}}}\n"
    )
    return NewProject(directory)


def database_like_the_tests(name: str) -> dict[str, Any]:
    """The test run's database server with another database ``name`` (SQLite: a file path)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"ENGINE": s["ENGINE"], "NAME": name}
    keys = ("ENGINE", "USER", "PASSWORD", "HOST", "PORT")
    return {**{k: s[k] for k in keys}, "NAME": name}


def create_empty_database(name: str) -> None:
    """A new, empty database on the test run's server (not SQLite: a new file is empty)."""
    quoted = connection.ops.quote_name(name)
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quoted}")
        cursor.execute(f"CREATE DATABASE {quoted}")


def drop_database(name: str) -> None:
    quoted = connection.ops.quote_name(name)
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quoted}")


def add(project: NewProject, module: str, text: str) -> None:
    """``text`` appended to the project's ``shop/<module>`` (its settings or urls)."""
    path = project.root / "shop" / module
    path.write_text(path.read_text() + text)


def add_app(project: NewProject, name: str, modules: dict[str, str]) -> None:
    """A package ``name`` in the project, with ``modules`` (name: indented source) in it."""
    app = project.root / name
    app.mkdir()
    (app / "__init__.py").write_text("")
    for module, text in modules.items():
        (app / f"{module}.py").write_text(textwrap.dedent(text))


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def probe(project: NewProject, call: str) -> Any:
    """``notify.probe.<call>`` run by the project; the value it showed (``show(value)``)."""
    out = ok(project.manage("shell", "-c", f"from notify.probe import *; show({call})"))
    return json.loads(out.split("PROBE ", 1)[1])


@contextlib.contextmanager
def two_databases(
    directory: Path, suffixes: tuple[str, str]
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """A project's ``default`` and ``jobs`` databases, new and empty, until the block ends:
    two SQLite files in ``directory``, or two databases beside the test database named with
    ``suffixes`` (dropped afterwards)."""
    if connection.vendor == "sqlite":
        yield (
            database_like_the_tests(str(directory / "app.sqlite3")),
            database_like_the_tests(str(directory / "jobs.sqlite3")),
        )
        return
    names = [f"{connection.settings_dict['NAME']}_{suffix}" for suffix in suffixes]
    for name in names:
        create_empty_database(name)
    try:
        yield database_like_the_tests(names[0]), database_like_the_tests(names[1])
    finally:
        for name in names:
            drop_database(name)
