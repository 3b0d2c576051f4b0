"""Run one sample of a page: Python (code or a ``>>>`` session), settings, shell, console.

- Python runs in the page's namespace, under the module its first line names
  (``# shop/jobs.py`` runs as ``shop.jobs``, so its jobs get the names a reader's would).
- A settings block (``# settings.py``, or nothing but imports and UPPERCASE assignments)
  declares settings for the rest of the page, read back through the app's own settings
  module, which refuses a bad value; ``INSTALLED_APPS = [..., "app"]`` checks that the apps
  named are installed.
- ``console``: each ``$ python manage.py ...`` runs in this process, on the test database,
  and what it prints (stdout and stderr, as a terminal shows them; a ``CommandError`` as
  ``manage.py`` prints it) is compared with the lines below it. ``...`` stands for anything
  (a worker id, a time) and runs of whitespace compare equal (table columns).
- ``sh``: the same commands, which must succeed; their output is not shown so not compared.

A sample that needs an optional extra (``psycopg`` for the PostgreSQL benchmark, ...) is skipped,
naming the extra, where that extra is not installed: ``pytest docs`` passes with only the ``test``
extra, and runs every sample where all are (``.ci/run`` installs ``dev``).
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import re
import shlex
from collections.abc import Iterator
from typing import Any
from unittest import SkipTest

import django
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError
from django.db import connection

from .blocks import Block
from .project import DocProject

PATH_LABEL = re.compile(r"^#\s*(?P<path>[\w./-]+\.py)\b")
MANAGE = re.compile(r"^(?:\./manage\.py|(?:\S*/)?python3?\s+(?:\S*/)?manage\.py)\s+(?P<rest>.*)$")
CHECKER_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
VENDORS = {"postgresql": "PostgreSQL", "sqlite": "SQLite", "mysql": "MariaDB/MySQL"}
EXTRAS = {
    "psycopg": "postgres",
    "MySQLdb": "mysql",
    "prometheus_client": "metrics",
    "playwright": "browser",
    "pgqueuer": "benchmark",
    "asyncpg": "benchmark",
    "django_tasks_db": "benchmark",
}
"""Top-level modules of the optional extras (pyproject.toml), and the extra that brings each."""


def evaluate(example: Any) -> None:
    """Sybil's evaluator for every region ``tests.docsamples.parser`` yields."""
    block: Block = example.parsed
    project: DocProject = example.namespace["doc_project"]
    if block.marker == "run on":
        skip_unless(block.reason)
    with skip_without_extras():
        if block.language in ("python", "pycon"):
            run_python(block, example.namespace, project)
        elif block.language == "console":
            run_console(block, project)
        else:
            run_shell(block, project)


@contextlib.contextmanager
def skip_without_extras() -> Iterator[None]:
    """A sample that imports a module of an optional extra not installed here is skipped,
    naming the extra; any other missing module fails it."""
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top not in EXTRAS:
            raise
        raise SkipTest(
            f"this sample needs {top}: pip install 'django-leasejobs[{EXTRAS[top]}]'"
        ) from exc


def skip_unless(condition: str) -> None:
    """``run on: postgresql, mysql`` / ``run on: Django 6`` (a major version): skipped, saying
    why, elsewhere."""
    wanted = [part.strip() for part in condition.split(",") if part.strip()]
    for part in wanted:
        if part in VENDORS and connection.vendor == part:
            return
        version = re.fullmatch(r"Django (\d+)", part)
        if version and django.VERSION[0] == int(version[1]):
            return
        if part not in VENDORS and not version:
            raise ValueError(f"unknown 'run on' condition {part!r}")
    names = " or ".join(VENDORS.get(part, part) for part in wanted)
    raise SkipTest(f"this sample needs {names}")


# Python ------------------------------------------------------------------------------------


def module_name(block: Block) -> str | None:
    label = PATH_LABEL.match(block.source)
    if label is None:
        return None
    path = label["path"].removesuffix(".py").removesuffix("/__init__")
    return path.replace("/", ".")


def is_settings(block: Block) -> bool:
    first = block.source.lstrip().splitlines()[0] if block.source.strip() else ""
    if re.match(r"#\s*(test )?settings(\.py)?\b", first):
        return True
    if block.source.lstrip().startswith(">>>"):
        return False
    tree = ast.parse(block.source)
    assigned = False
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else None
        if not targets or not all(isinstance(t, ast.Name) and t.id.isupper() for t in targets):
            return False
        assigned = True
    return assigned


def run_python(block: Block, namespace: dict[str, Any], project: DocProject) -> None:
    if is_settings(block):
        run_settings(block, project)
    elif block.source.lstrip().startswith(">>>"):
        run_doctest(block, namespace)
    else:
        code = compile("\n" * block.line + block.source, str(block.path), "exec")
        name = module_name(block)
        if name is None:
            namespace["__name__"] = "__main__"
            exec(code, namespace)
            namespace.pop("__builtins__", None)
        else:
            exec(code, vars(project.module(name)))


def run_settings(block: Block, project: DocProject) -> None:
    from django.conf import settings

    from django_leasejobs.core.conf import settings as app_settings

    values: dict[str, Any] = {"__name__": "settings"}
    exec(compile("\n" * block.line + block.source, str(block.path), "exec"), values)
    declared = {name: value for name, value in values.items() if name.isupper()}
    apps = declared.pop("INSTALLED_APPS", None)
    if apps is not None:
        assert apps[0] is Ellipsis, "a sample's INSTALLED_APPS adds to the project's: [..., app]"
        missing = [app for app in apps[1:] if app not in settings.INSTALLED_APPS]
        assert not missing, f"not installed in the test project: {missing}"
    project.override(declared)
    for name in declared:
        if name.startswith("LEASEJOBS_"):
            getattr(app_settings, name.removeprefix("LEASEJOBS_"))  # validated as at start


def run_doctest(block: Block, namespace: dict[str, Any]) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.source, namespace, block.where, str(block.path), block.line)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=CHECKER_FLAGS)
    runner.run(test, out=out.write, clear_globs=False)
    namespace.pop("__builtins__", None)
    assert not runner.failures, out.getvalue()


# Commands ----------------------------------------------------------------------------------


def commands(source: str) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` per ``$`` line of a console session."""
    found: list[tuple[str, list[str]]] = []
    lines = source.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and index + 1 < len(lines):
                index += 1
                command = command[:-1] + " " + lines[index].strip()
            found.append((command.strip(), []))
        elif found:
            found[-1][1].append(line)
        else:
            raise ValueError(f"output before any command: {line!r}")
        index += 1
    return found


def shell_lines(source: str) -> list[str]:
    """The commands of an ``sh`` block: continuation lines joined, comments dropped."""
    joined = source.replace("\\\n", " ")
    return [
        line.strip()
        for line in joined.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def parse_manage(line: str) -> tuple[str, list[str]]:
    match = MANAGE.match(line)
    if match is None:
        raise AssertionError(
            f"cannot run {line!r} here (only `python manage.py ...` runs): run it in a "
            "test of its own, or mark the block `<!-- not run: REASON -->`"
        )
    words = shlex.split(match["rest"], comments=True)
    return words[0], words[1:]


def manage(line: str, project: DocProject) -> tuple[str, int]:
    """Run a ``manage.py`` line in this process; what a terminal shows, and the exit status."""
    name, args = parse_manage(line)
    if name == "runjobworker" and "--burst" not in args:
        raise AssertionError(
            f"`{line}` runs until it is stopped: give it --burst, or mark the block "
            "`<!-- options checked: REASON -->`"
        )
    out = io.StringIO()
    status = 0
    with project.terminal(out):
        try:
            call_command(name, *args, stdout=out, stderr=out)
        except CommandError as exc:
            out.write(f"CommandError: {exc}\n")
            status = exc.returncode
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    return out.getvalue(), status


def check_options(line: str) -> None:
    """Parse a command line with the command's own parser, without running it."""
    name, args = parse_manage(line)
    app = get_commands()[name]
    command = load_command_class(app, name)
    command.create_parser("manage.py", name).parse_args(args)


def run_console(block: Block, project: DocProject) -> None:
    checker = doctest.OutputChecker()
    for line, expected in commands(block.source):
        if block.marker == "options checked":
            check_options(line)
            continue
        got, _ = manage(line, project)
        want = "\n".join(expected).rstrip() + "\n" if any(expected) else ""
        if not checker.check_output(want, got, CHECKER_FLAGS):
            raise AssertionError(
                f"{block.where}: `{line}` printed:\n{got}\nThe page shows:\n{want}"
            )


def run_shell(block: Block, project: DocProject) -> None:
    for line in shell_lines(block.source):
        if block.marker == "options checked":
            check_options(line)
            continue
        got, status = manage(line, project)
        assert status == 0, f"{block.where}: `{line}` exited {status}:\n{got}"
