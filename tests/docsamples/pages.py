"""Pages of tests: the samples of a page about testing run as the reader's tests do, under
pytest and pytest-django in a project of their own.

A page has tests when one of its blocks is labelled ``# tests/test_<name>.py``: that block is
the top of a test module (its imports, its ``pytestmark``), and each Python block after it is
a test of that module, either written out (``def test_...``) or the body of one (wrapped in a
test function, or in a ``TestCase`` method when it uses ``self``). Blocks labelled with
another path (``# shop/jobs.py``) are the project's code, written to files; their top-level
package becomes an installed app. The whole module runs once, in a subprocess on a test
database of its own (pytest-django creates it), and each block reports its own tests.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection

from .blocks import ROOT, Block, blocks
from .project import DocProject
from .runners import PATH_LABEL, is_settings

TEST_FILE = "tests/test_"


@dataclass
class TestPage:
    header: Block
    files: list[Block]
    bodies: list[Block]
    names: dict[int, list[str]] = field(default_factory=dict)  # block line -> test names

    def owns(self, block: Block) -> bool:
        return any(block.line == b.line for b in [self.header, *self.files, *self.bodies])


def test_page(path: Path) -> TestPage | None:
    """The page's test module, if it has one."""
    python = [b for b in blocks(path) if b.runs and b.language == "python" and not is_settings(b)]
    header = next((b for b in python if label(b).startswith(TEST_FILE)), None)
    if header is None:
        return None
    files = [b for b in python if label(b) and not label(b).startswith("tests/")]
    bodies = [b for b in python if b.line > header.line and not label(b)]
    return TestPage(header, files, bodies)


def label(block: Block) -> str:
    match = PATH_LABEL.match(block.source)
    return match["path"] if match else ""


def tests_defined(source: str) -> list[str]:
    """The test functions and classes a block defines at its top level."""
    return [
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name.lower().startswith("test")
    ]


def module_source(page: TestPage) -> str:
    parts = [page.header.source]
    if tests_defined(page.header.source):
        page.names[page.header.line] = tests_defined(page.header.source)
    for body in page.bodies:
        defined = tests_defined(body.source)
        if defined:
            page.names[body.line] = defined
            parts.append(body.source)
        elif "self." in body.source:
            name = f"TestLine{body.line}"
            page.names[body.line] = [name]
            parts.append(
                "import django.test\n\n\n"
                f"class {name}(django.test.TestCase):\n    def test_sample(self):\n"
                + textwrap.indent(body.source, " " * 8)
            )
        else:
            name = f"test_line_{body.line}"
            page.names[body.line] = [name]
            parts.append(f"def {name}():\n" + textwrap.indent(body.source, " " * 4))
    return "\n\n".join(parts)


def run(page: TestPage, project: DocProject) -> dict[str, str]:
    """Run the page's tests; ``{test or class name: "" if passed, else the failure}``."""
    where = project.scratch
    packages = set()
    written: set[Path] = set()
    for block in page.files:
        target = where / label(block)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target in written:  # "# shop/jobs.py (continued)": the rest of the module
            target.write_text(target.read_text() + "\n\n" + block.source)
        else:
            target.write_text(block.source)
            written.add(target)
        packages.add(Path(label(block)).parts[0])
        for parent in Path(label(block)).parents:
            if str(parent) != ".":
                (where / parent / "__init__.py").touch()
    test_file = where / label(page.header)
    test_file.parent.mkdir(parents=True, exist_ok=True)
    test_file.write_text(module_source(page))
    (where / "doc_settings.py").write_text(settings_source(sorted(packages)))
    (where / "pytest.ini").write_text(
        "[pytest]\nDJANGO_SETTINGS_MODULE = doc_settings\n"
        "filterwarnings =\n    error\n    ignore::DeprecationWarning:environ.*\n"
        # Django 6.1 warns that send_mail() needs settings.MAILERS from 2028: Django's notice to
        # every project, not the sample's fault (5.2 and 6.0 have no such setting).
        "    ignore:Django 2028 will not have a default mailer\n"
    )
    report = where / "report.xml"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(where), str(ROOT / "testproject"), str(ROOT)])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            str(test_file),
        ],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if not report.exists():
        raise AssertionError(f"pytest did not run the page's tests:\n{done.stdout}{done.stderr}")
    results: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        text = "" if problem is None else (problem.get("message", "") + "\n" + (problem.text or ""))
        for name in (case.get("name", ""), case.get("classname", "").rpartition(".")[2]):
            results[name] = results.get(name, "") + text
    results["__output__"] = done.stdout + done.stderr
    return results


def settings_source(apps: list[str]) -> str:
    """The test project's settings, with the page's packages installed and a test database
    of the page's own beside this run's."""
    name = str(connection.settings_dict["NAME"])
    test_name = f"{name}-pages" if connection.vendor == "sqlite" else f"{name}_pages"
    return (
        "from testproject.test_settings import *  # noqa: F403\n\n"
        f"INSTALLED_APPS = [*INSTALLED_APPS, *{apps!r}]  # noqa: F405\n"
        'DATABASES["default"]["TEST"] = {  # noqa: F405\n'
        f'    **DATABASES["default"].get("TEST", {{}}), "NAME": {test_name!r}  # noqa: F405\n'
        "}\n"
    )


def check(block: Block, page: TestPage, project: DocProject) -> None:
    """The outcome of the tests ``block`` holds (the module runs at the page's first one)."""
    results = project.cache.get("pytest")
    if results is None:
        results = project.cache["pytest"] = run(page, project)
    names = page.names.get(block.line, [])
    missing = [name for name in names if name not in results]
    assert not missing, f"pytest ran no test {missing}:\n{results['__output__']}"
    failed = {name: results[name] for name in names if results[name]}
    assert not failed, "\n".join(f"{name}: {text}" for name, text in failed.items())
