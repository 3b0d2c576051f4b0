"""Every fenced block of README.md and the docs' pages is run (conftest.py, tests/docsamples/) or
says, visibly, why not; and the runners fail when a sample and its page disagree."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import types
import unittest
from pathlib import Path

import pytest

from tests.docsamples import blocks, pages, runners
from tests.docsamples.project import DocProject

PAGE = Path(blocks.ROOT / "docs" / "example.md")


def page(text: str) -> list[blocks.Block]:
    return blocks.blocks(PAGE, textwrap.dedent(text))


@pytest.mark.parametrize("path", blocks.pages(), ids=lambda p: str(p.relative_to(blocks.ROOT)))
def test_every_block_is_run_or_marked(path: Path) -> None:
    left = [
        f"{block.where} ({block.language or 'no language'})" for block in blocks.unaccounted(path)
    ]
    assert not left, (
        "blocks that are neither run nor marked: run them (python, console, sh) or put "
        "`<!-- not run: REASON -->` on the line before the fence:\n" + "\n".join(left)
    )
    unexplained = [b.where for b in blocks.blocks(path) if b.marker and not b.reason]
    assert not unexplained, f"markers without a reason: {unexplained}"


def test_the_pages_are_collected() -> None:
    names = {str(p.relative_to(blocks.ROOT)) for p in blocks.pages()}
    assert {
        "README.md",
        "docs/worker.md",
        "docs/testing.md",
        "docs/howto/deploy-workers.md",
        "docs/reference/jobs.md",
    } <= names


def test_a_list_table_of_code_is_one_block_that_says_why_it_is_not_run() -> None:
    found = page(
        """\
        ::::{list-table}
        * - ```python
            celery_code()
            ```
          - ```python
            leasejobs_code()
            ```
        ::::

        ```python
        after = 1
        ```
        """
    )
    assert [(b.line, b.language) for b in found] == [(1, "list-table"), (10, "python")]
    assert "celery_code()" in found[0].source
    assert not found[0].runs
    assert found[1].source == "after = 1\n"


def test_an_unmarked_block_of_another_language_is_reported() -> None:
    found = page(
        """\
        ```yaml
        a: 1
        ```

        <!-- not run: a Kubernetes manifest -->
        ```yaml
        b: 2
        ```

        ```{toctree}
        worker
        ```
        """
    )
    unmarked = [b for b in found if not b.is_directive and not b.runs and b.marker != "not run"]
    assert [b.line for b in unmarked] == [1]
    assert (found[1].marker, found[1].reason) == ("not run", "a Kubernetes manifest")
    assert found[2].is_directive


def test_markers_and_indented_fences() -> None:
    found = page(
        """\
        - a list item:

          <!-- run on: postgresql, mysql -->
          ```python
          x = 1
          ```
        """
    )
    assert len(found) == 1
    assert (found[0].marker, found[0].reason, found[0].source) == (
        "run on",
        "postgresql, mysql",
        "x = 1\n",
    )


def test_console_sessions_split_into_commands_and_output() -> None:
    session = "$ python manage.py jobstats \\\n    --json\n{}\n$ ./manage.py check\nok\n"
    assert runners.commands(session) == [
        ("python manage.py jobstats  --json", ["{}"]),
        ("./manage.py check", ["ok"]),
    ]


def test_only_manage_commands_run() -> None:
    assert runners.parse_manage("python manage.py jobqueue pause mail  # a comment") == (
        "jobqueue",
        ["pause", "mail"],
    )
    with pytest.raises(AssertionError, match="mark the block"):
        runners.parse_manage("curl http://127.0.0.1:8000/")


@pytest.mark.django_db
def test_a_console_sample_whose_output_differs_fails() -> None:
    [good, bad] = page(
        """\
        ```console
        $ python manage.py jobqueue list
        Nothing is paused.
        ```

        ```console
        $ python manage.py jobqueue list
        Nothing is paused, ever.
        ```
        """
    )
    project = DocProject()
    runners.run_console(good, project)
    with pytest.raises(AssertionError, match="printed"):
        runners.run_console(bad, project)


def test_a_settings_sample_is_checked_by_the_app() -> None:
    [bad] = page(
        """\
        ```python
        LEASEJOBS_MAX_ATTEMPTS = "five"
        ```
        """
    )
    project = DocProject()
    try:
        with pytest.raises(Exception, match="MAX_ATTEMPTS"):
            runners.run_python(bad, {}, project)
    finally:
        for override in project._overrides:
            override.disable()


def test_a_doctest_sample_whose_output_differs_fails() -> None:
    [sample] = page(
        """\
        ```python
        >>> 1 + 1
        3
        ```
        """
    )
    out = io.StringIO()
    with pytest.raises(AssertionError, match="Expected"):
        runners.run_doctest(sample, {"out": out})


def test_the_tests_a_test_module_header_defines_are_checked_too() -> None:
    [header, body] = page(
        """\
        ```python
        # tests/test_shop.py
        import pytest


        def test_in_the_header():
            pass
        ```

        ```python
        assert 1
        ```
        """
    )
    test_page = pages.TestPage(header, [], [body])
    pages.module_source(test_page)
    assert test_page.names == {1: ["test_in_the_header"], 10: ["test_line_10"]}


def test_a_sample_that_needs_an_extra_not_installed_is_skipped_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    [needs_psycopg, needs_a_typo] = page(
        """\
        ```python
        import psycopg
        ```

        ```python
        import psycopgg
        ```
        """
    )
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where the extra is not installed

    def evaluate(block: blocks.Block) -> None:
        runners.evaluate(types.SimpleNamespace(parsed=block, namespace={"doc_project": None}))

    with pytest.raises(unittest.SkipTest, match=r"needs psycopg: .*django-leasejobs\[postgres\]"):
        evaluate(needs_psycopg)
    with pytest.raises(ModuleNotFoundError, match="psycopgg"):
        evaluate(needs_a_typo)


BLOCKED = """
import json, sys, types, unittest
from tests.docsamples import runners
for name in runners.EXTRAS:
    sys.modules[name] = None  # as with only the test extra installed
import django
django.setup()
from tests.docsamples import blocks
skipped = {}
for path in blocks.pages():
    for block in blocks.blocks(path):
        if block.marker == "options checked":
            example = types.SimpleNamespace(parsed=block, namespace={"doc_project": None})
            try:
                runners.evaluate(example)
            except unittest.SkipTest as exc:
                skipped[block.where] = str(exc)
print(json.dumps(skipped))
"""


def test_the_commands_of_the_pages_parse_with_only_the_test_extra() -> None:
    """``pytest docs`` with ``pip install '.[test]'`` alone: every command sample whose command
    needs an extra (the benchmark needs psycopg) is skipped, naming it, and the others parse.
    In a process of its own, where the extras' modules cannot be imported."""
    # SQLite, as with only the test extra: no database driver of an extra is importable.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
    env["DJANGO_SETTINGS_MODULE"] = "testproject.test_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(blocks.ROOT), str(blocks.ROOT / "testproject")])
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED],
        cwd=blocks.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    skipped = json.loads(done.stdout)
    benchmark = [where for where in skipped if where.startswith("docs/benchmarks.md:")]
    assert benchmark, skipped
    assert all("needs psycopg" in skipped[where] for where in benchmark), skipped
