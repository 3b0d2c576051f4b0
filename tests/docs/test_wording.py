"""README.md and docs/ are for users: no lab notebook, no names the code no longer has.

History (issue numbers, dated rounds of work, what a past version did) belongs in the
CHANGELOG. Code blocks are left out of the wording checks: a program's output may well print
``job #41``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`+[^`]*`+")

ISSUE = re.compile(r"(?<![\w&/])#\d+\b|\b(?:issue|PR|pull request)s? #?\d+", re.I)
ROUND = re.compile(r"\brounds?\b(?![- ]trips?)", re.I)
READING = re.compile(r"\b(?:first|second|third|fourth|fifth|later) reading\b", re.I)
DATED_HEADING = re.compile(r"^#+ .*\b20\d\d-\d\d-\d\d", re.M)


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prose(path: Path) -> str:
    """The page without its code blocks and inline code."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return INLINE_CODE.sub("", text)


def findings(pattern: re.Pattern[str], text: str) -> list[str]:
    lines = text.splitlines()
    return [
        f"line {n}: {line.strip()}"
        for n, line in enumerate(lines, 1)
        if pattern.search(line)  # one line at a time: the report names it
    ]


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_no_issue_numbers_rounds_or_readings(page: Path) -> None:
    text = prose(page)
    found = findings(ISSUE, text) + findings(ROUND, text) + findings(READING, text)
    found += findings(DATED_HEADING, page.read_text(encoding="utf-8"))
    assert found == [], f"{page_id(page)} reads like a lab notebook: {found}"


DOTTED = re.compile(r"\bdjango_leasejobs(?:\.[A-Za-z_]\w*)+")


def resolves(dotted: str) -> bool:
    """``package.module.attribute...``: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for name in parts[end:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def permissions() -> set[str]:
    """``django_leasejobs.<codename>``: how Django names the app's permissions."""
    from django.apps import apps

    codenames = set()
    for model in apps.get_app_config("django_leasejobs").get_models():
        meta = model._meta
        codenames |= {f"{action}_{meta.model_name}" for action in meta.default_permissions}
        codenames |= {codename for codename, _ in meta.permissions}
    return {f"django_leasejobs.{codename}" for codename in codenames}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_name_of_the_package_exists(page: Path) -> None:
    """A page naming a module or function the code no longer has misleads its reader."""
    names = set(DOTTED.findall(page.read_text(encoding="utf-8"))) - permissions()
    missing = sorted(name for name in names if not resolves(name))
    assert missing == [], f"{page_id(page)} names what the code does not have: {missing}"


CONTEXT_CALL = re.compile(r"`ctx\.(?P<method>\w+)\((?P<arguments>[^`]*)\)`")


def context_calls(page: Path) -> list[tuple[str, str]]:
    """Each ``ctx.method(arguments)`` written as inline code: (method, arguments)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [(m["method"], m["arguments"]) for m in CONTEXT_CALL.finditer(text)]


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_call_of_the_handler_context_takes_the_arguments_written(page: Path) -> None:
    """``ctx.first_time()`` without its key reads as a call that needs none: a call written in
    the prose must be one the context's method accepts (names stand for values)."""
    from django_leasejobs.runtime.context import JobContext

    wrong = []
    for method, arguments in context_calls(page):
        target = getattr(JobContext, method, None)
        if not callable(target):
            wrong.append(f"ctx.{method}: JobContext has no such method")
            continue
        call = ast.parse(f"f({arguments})", mode="eval").body
        assert isinstance(call, ast.Call)
        if any(isinstance(arg, ast.Constant) and arg.value is Ellipsis for arg in call.args):
            continue  # ctx.method(...): arguments left out on purpose
        try:
            inspect.signature(target).bind(
                None, *call.args, **{k.arg: k.value for k in call.keywords if k.arg}
            )
        except TypeError as exc:
            wrong.append(f"ctx.{method}({arguments}): {exc}")
    assert wrong == [], f"{page_id(page)}: {wrong}"
