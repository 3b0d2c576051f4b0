"""The fenced blocks of the Markdown docs, and what each one's marker says about running it.

A block is run when its language is one the runners know (Python, console sessions, shell
commands). Anything else (a Kubernetes manifest, a systemd unit, an nginx config, output that
no command reproduces here) must say why it is not run, visibly, in an HTML comment on the
line before its fence::

    <!-- not run: a Kubernetes manifest -->

Other markers on that line:

- ``<!-- run on: postgresql -->`` (``sqlite``, ``mysql``, ``Django 6``, comma-separated): run
  in those passes only, reported as skipped, with the reason, elsewhere;
- ``<!-- options checked: REASON -->``: shell commands whose options are parsed by the
  command's own parser but which are not run (a worker that runs until it is stopped).

Blocks whose language is a MyST directive (``{toctree}``, ``{include}``) are not samples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PAGES = ("README.md", "docs/*.md", "docs/howto/*.md", "docs/reference/*.md")
"""The pages whose samples run, relative to the repository root."""

RUN_LANGUAGES = frozenset({"python", "pycon", "console", "sh", "bash", "shell"})

MARKER = re.compile(r"^\s*<!--\s*(not run|run on|options checked):\s*(.*?)\s*-->\s*$")

RUN_ELSEWHERE = {
    "<!-- walkthrough:start -->": "tests/api/test_walkthrough.py runs it with curl",
    "<!-- openapi:start -->": "tests/api/test_schema.py compares it with the API's schema",
}
"""Blocks between markers of their own, run or compared by a test of their own."""

PAGES_RUN_ELSEWHERE = {
    "docs/tutorial.md": "tests/docs/test_tutorial.py follows it in a new startproject project",
}
"""Pages whose every block a test of their own runs, in order, outside the test project."""

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")

TABLE = re.compile(r"^(?P<indent>[ \t]*)(?P<colons>:{3,})\{list-table\}")
"""A MyST list table (``::::{list-table}``): code side by side in its cells, one block of
language ``list-table``, which is not run, so it says why."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text (indent removed), its marker."""

    path: Path
    line: int  # 1-based line of the opening fence
    start: int  # character offsets of the whole block, fences included
    end: int
    language: str
    source: str
    marker: str  # "", "not run", "run on", "options checked", or "run elsewhere"
    reason: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_directive(self) -> bool:
        return self.language.startswith("{")

    @property
    def runs(self) -> bool:
        """Whether a runner of this suite executes (or, options checked, parses) it."""
        return self.language in RUN_LANGUAGES and self.marker not in ("not run", "run elsewhere")


def pages() -> list[Path]:
    return sorted(path for pattern in PAGES for path in ROOT.glob(pattern))


def blocks(path: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of the page, in order (nested fences stay inside their block)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    found: list[Block] = []
    index = 0
    while index < len(lines):
        table = TABLE.match(lines[index])
        if table is not None:
            close = index + 1
            end = re.compile(rf"^[ \t]*{table['colons']}[ \t]*$")
            while close < len(lines) and not end.match(lines[close]):
                close += 1
            marker, reason = _marker(lines[:index])
            found.append(
                Block(
                    path=path,
                    line=index + 1,
                    start=offsets[index],
                    end=offsets[min(close + 1, len(lines))],
                    language="list-table",
                    source="".join(lines[index + 1 : close]),
                    marker=marker,
                    reason=reason,
                )
            )
            index = close + 1
            continue
        opening = FENCE.match(lines[index].rstrip("\n"))
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        close = index + 1
        while close < len(lines):
            closing = FENCE.match(lines[close].rstrip("\n"))
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            close += 1
        body = "".join(
            line[len(indent) :] if line.startswith(indent) else line
            for line in lines[index + 1 : close]
        )
        marker, reason = _marker(lines[:index])
        if not marker and _relative(path) in PAGES_RUN_ELSEWHERE:
            marker, reason = "run elsewhere", PAGES_RUN_ELSEWHERE[_relative(path)]
        found.append(
            Block(
                path=path,
                line=index + 1,
                start=offsets[index],
                end=offsets[min(close + 1, len(lines))],
                language=opening["info"].strip().split(" ")[0] if opening["info"] else "",
                source=body,
                marker=marker,
                reason=reason,
            )
        )
        index = close + 1
    return found


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _marker(before: list[str]) -> tuple[str, str]:
    """The marker on the last non-blank line before a fence, if any."""
    for line in reversed(before):
        if not line.strip():
            continue
        if line.strip() in RUN_ELSEWHERE:
            return "run elsewhere", RUN_ELSEWHERE[line.strip()]
        match = MARKER.match(line)
        return (match[1], match[2]) if match else ("", "")
    return "", ""


def unaccounted(path: Path) -> list[Block]:
    """Blocks neither run nor marked: each one is a sample nobody checks."""
    return [
        block
        for block in blocks(path)
        if not block.is_directive
        and not block.runs
        and block.marker not in ("not run", "run elsewhere")
    ]
