"""README.md as a new user reads it: the figures it quotes are docs/benchmarks.md's, its links
lead to pages and headings that exist, and its two commands name what the repository has.

The Sphinx build checks the links of the README's parts the site includes; this checks them all.
Its samples run with the docs' (conftest.py); ``manage.py demo`` runs in tests/test_demo.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docsamples.blocks import ROOT

README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
CI = ROOT / ".ci" / "run"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
FIGURE = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?x?|(?<![\w.])\d+\.\d+x?(?![\w.])")


def prose(path: Path) -> str:
    """The page without its fenced blocks (code is not quoted figures or links)."""
    return re.sub(r"(?ms)^\s*(`{3,}).*?^\s*\1\s*$", "", path.read_text())


def paragraphs(text: str) -> list[str]:
    return [part for part in re.split(r"\n\s*\n", text) if part.strip()]


def slug(heading: str) -> str:
    """The anchor MyST gives a heading (``myst_heading_anchors``), GitHub's way."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m[1]) for m in re.finditer(r"(?m)^#{1,6}\s+(.*)$", prose(page))}


def ci_passes() -> set[str]:
    """The pass names ``.ci/run`` accepts: the labels of its ``case "$pass"`` arms."""
    arms = re.findall(r"(?m)^\s{4}([\w|* -]+)\)\s*$", CI.read_text())
    return {name.strip() for arm in arms for name in arm.split("|") if "*" not in name} - {""}


def test_the_figures_quoted_are_the_benchmark_pages() -> None:
    quoting = [p for p in paragraphs(prose(README)) if "docs/benchmarks.md)" in p]
    figures = [figure for p in quoting for figure in FIGURE.findall(p)]
    assert figures, "the README quotes no figure beside its link to docs/benchmarks.md"
    table_rows = "\n".join(
        line for line in BENCHMARKS.read_text().splitlines() if line.startswith("|")
    )
    cells = set(re.findall(r"[\d.,]+x?", table_rows))
    missing = [figure for figure in figures if figure not in cells]
    assert not missing, f"figures of the README that docs/benchmarks.md's tables lack: {missing}"


def test_a_figure_is_found_in_prose() -> None:
    text = "runs 13,614 jobs/s (1.79x its peer), 2.27 ms, on Django 5 with 2 cores"
    assert FIGURE.findall(text) == ["13,614", "1.79x", "2.27"]


def test_every_link_leads_to_a_page_and_heading_that_exist() -> None:
    broken = []
    for match in LINK.finditer(prose(README)):
        target = match["target"]
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        page = (ROOT / path) if path else README
        if not page.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(page):
            broken.append(f"{target}: no heading #{anchor} in {path}")
    assert not broken, "\n".join(broken)


def test_slugs_are_myst_anchors() -> None:
    assert slug("`manage.py checkjobs` for cron, CI and probes") == (
        "managepy-checkjobs-for-cron-ci-and-probes"
    )
    assert "what-it-prints" in anchors(ROOT / "docs" / "worker.md")


def test_the_two_commands_name_what_the_repository_has() -> None:
    text = README.read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras = set(re.findall(r"(?m)^([\w-]+) = \[", section))
    assert {"test", "docs", "dev"} <= extras, extras
    for extra in re.findall(r"pip install [^\n]*-e '\.\[([\w,]+)\]'", text):
        assert set(extra.split(",")) <= extras, extra
    assert "testproject/manage.py demo" in text
    assert (ROOT / "testproject" / "manage.py").exists()
    assert (ROOT / "testproject" / "demo" / "management" / "commands" / "demo.py").exists()
    named = set(re.findall(r"bash \.ci/run (\w[\w-]*)", text))
    assert named, "the README names no pass of .ci/run"
    assert named <= ci_passes(), named - ci_passes()


def test_contributing_lists_the_passes_of_ci() -> None:
    passes = ci_passes()
    assert {"sqlite", "postgres", "mariadb", "wheel", "fuzz"} <= passes
    default = re.search(r"PASSES=\$\{\*:-([^}]*)\}", CI.read_text())
    assert default, "no default passes in .ci/run"
    text = CONTRIBUTING.read_text()
    assert f"`{default[1]}`" in text, "CONTRIBUTING.md names other default passes than .ci/run"
    listed = set(re.findall(r"`([\w-]+)`", text)) | set(default[1].split())
    assert passes <= listed, f"passes CONTRIBUTING.md does not name: {passes - listed}"
