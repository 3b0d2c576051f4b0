"""docs/architecture.md's diagram of the layers matches the package and the layer contract.

Every folder and module of ``django_leasejobs`` (but the migrations) is named in the diagram,
nothing it names is missing, and its rows are the import-linter contract's layers in order,
with the same siblings. So the page cannot drift from the code it describes.

``tests/`` mirrors the package, so a newcomer finds the tests of ``django_leasejobs/x/y.py``
in ``tests/x/test_y*.py``: every folder of tests names a folder of the package (but the few
in ``NOT_A_MODULE``, whose tests are of the project as a whole), every folder of the package
has its folder of tests, and a test file at the top of ``tests/`` names a module at the top
of the package (or a subject in ``PROJECT_TESTS``).
"""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_leasejobs"
TESTS = ROOT / "tests"
MARKER = "<!-- not run: a diagram of the layers -->"
NOT_A_MODULE = {
    "acceptance": "worker subprocesses and injected faults, across every layer",
    "docs": "README.md and docs/: their samples, links, images and wording",
    "outside_project": "a project outside the repository, run against the built wheel",
}
"""The folders of tests that mirror no package folder, and what they test instead."""
PROJECT_TESTS = {
    "architecture": "this file: the layers' page, the contract and the tests' layout",
    "benchmark_command": "testproject's ``manage.py benchmark``",
    "demo": "testproject's ``manage.py demo``, the README's first command",
    "migrations": "the migrations (a folder of tests named so would be left out by ruff)",
    "public_names": "the public face: the package's top-level names",
    "typing": "mypy over a sample project",
}
"""The test files at the top of ``tests/`` that name no top module of the package."""


def diagram() -> list[tuple[str, list[str]]]:
    """The diagram's rows: a label and its tokens (descriptions, ``|  ...`` lines, dropped)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split(MARKER, 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    rows: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if not line.strip() or re.match(r"\s+\|  ", line):
            continue
        if not line[0].isspace():
            label, _, rest = line.partition(" ")
            # A label that is a folder ("runtime/") is also the row's first folder.
            rows.append((label, ([label] if label.endswith("/") else []) + rest.split()))
        else:
            rows[-1][1].extend(line.split())
    return rows


def named(tokens: list[str]) -> tuple[set[str], set[str]]:
    """The modules (paths inside the package) and the folders a row's tokens name."""
    modules, folders, folder = set(), set(), None
    for token in tokens:
        if token in {"|", ":"}:
            continue
        if token.endswith("/"):
            folder = token.rstrip("/")
            folders.add(folder)
        elif token.endswith(".py"):
            folder = None
            modules.add(token)
        else:
            assert folder is not None, f"{token!r} follows no folder"
            modules.add(f"{folder}/{token}.py")
    return modules, folders


def members(tokens: list[str]) -> set[frozenset[str]]:
    """A row as the contract spells a layer: ``|`` siblings, each a set of ``:`` modules."""
    groups: list[set[str]] = [set()]
    for token in tokens:
        if token == "|":
            groups.append(set())
        elif token.endswith(".py"):
            groups[-1].add("django_leasejobs." + token[:-3])
        elif token.endswith("/") and "/" not in token[:-1]:
            groups[-1].add("django_leasejobs." + token[:-1])
    return {frozenset(group) for group in groups}


def contract_layers() -> list[set[frozenset[str]]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert "ignore_imports" not in contract, "the layer contract lists no exception"
    return [
        {frozenset(m.strip() for m in group.split(":")) for group in layer.split("|")}
        for layer in contract["layers"]
    ]


def tree() -> tuple[set[str], set[str]]:
    modules, folders = set(), set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "migrations":
            continue
        if path.name == "__init__.py":
            if relative.parent != Path("."):
                folders.add(relative.parent.as_posix())
        else:
            modules.add(relative.as_posix())
    return modules, folders


def test_the_diagram_names_every_module_and_folder_of_the_tree_and_no_other():
    modules, folders = set(), set()
    for _, tokens in diagram():
        row_modules, row_folders = named(tokens)
        assert not modules & row_modules, f"named twice: {modules & row_modules}"
        modules |= row_modules
        folders |= row_folders
    on_disk_modules, on_disk_folders = tree()
    assert on_disk_modules - modules == set(), "modules missing from docs/architecture.md"
    assert modules - on_disk_modules == set(), "docs/architecture.md names modules not in the tree"
    assert folders == on_disk_folders


def test_the_diagram_rows_are_the_contract_layers_in_order():
    assert [members(tokens) for _, tokens in diagram()] == contract_layers()


def test_the_diagram_parser_sees_the_rows():
    """The checks above would pass on an empty diagram: it has the layers the page describes."""
    labels = [label for label, _ in diagram()]
    assert labels[0] == "public"
    assert labels[-1] == "core"
    assert {"faces", "runtime/", "protocol/", "dialects/", "models/"} <= set(labels)


def folders_of_tests() -> tuple[set[str], set[str]]:
    """The folders of tests holding test files, and the package's folders (but migrations)."""
    tested = {
        path.parent.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("test_*.py")
        if path.parent != TESTS
    }
    _, package = tree()
    return tested, package


def test_every_folder_of_tests_names_a_folder_of_the_package():
    tested, package = folders_of_tests()
    elsewhere = {f for f in tested if f.split("/")[0] not in NOT_A_MODULE}
    assert elsewhere - package == set(), (
        "folders of tests that mirror no folder of django_leasejobs: the tests of "
        "django_leasejobs/x/y.py go in tests/x/test_y*.py"
    )
    assert set(NOT_A_MODULE) <= {f.split("/")[0] for f in tested}, "an allowed folder is gone"
    assert not set(NOT_A_MODULE) & package, "a folder of tests the package now mirrors"


def test_every_folder_of_the_package_has_its_folder_of_tests():
    _, package = folders_of_tests()
    missing = {f for f in package if not (TESTS / f / "__init__.py").is_file()}
    assert missing == set(), "folders of django_leasejobs without tests/<folder>/__init__.py"


def test_every_test_file_at_the_top_of_tests_names_a_top_module_or_the_project():
    modules, _ = tree()
    top = {m[:-3] for m in modules if "/" not in m}
    unplaced = {
        path.name
        for path in TESTS.glob("test_*.py")
        if not any(path.stem == f"test_{m}" or path.stem.startswith(f"test_{m}_") for m in top)
        and path.stem.removeprefix("test_") not in PROJECT_TESTS
    }
    assert unplaced == set(), (
        "test files at the top of tests/ that name no module at the top of django_leasejobs: "
        "the tests of django_leasejobs/x/y.py go in tests/x/test_y*.py"
    )
    for subject in PROJECT_TESTS:
        assert (TESTS / f"test_{subject}.py").is_file(), f"tests/test_{subject}.py is gone"
