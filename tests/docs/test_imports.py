"""The docs import public names only: a layer folder (``runtime/``, ``protocol/``, ...) is internal.

Readers copy a page's imports into their code, and the layer folders are the package's insides,
moved and split as the code asks (docs/architecture.md). So every import a page shows, in a
Python block, a ``>>>`` session, any other block or inline code, names a public home: the
package's top-level names, a module at its top (``django_leasejobs.stats``, ``.schedules``,
``.operations``, ...), ``django_leasejobs.models`` or a face's documented path.
docs/architecture.md, the page about the insides, is the one page that may name them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.docsamples import blocks
from tests.test_architecture import contract_layers

ROOT = blocks.ROOT
PACKAGE = "django_leasejobs"
INTERNALS_PAGE = ROOT / "docs" / "architecture.md"
PAGES = sorted(
    path for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")] if path != INTERNALS_PAGE
)

INTERNAL = frozenset({"runtime", "reports", "upkeep", "protocol", "dialects", "db", "core"})
"""The layer folders under the public surface (``models/`` is public: the models are)."""

PYTHON = frozenset({"python", "py", "pycon"})
INLINE_CODE = re.compile(r"`+([^`]*)`+")
IMPORT_TEXT = re.compile(
    rf"\bfrom\s+(?P<module>{PACKAGE}(?:\.\w+)*)\s+import\s+(?P<names>\(?[\w\s,]+)"
    rf"|\bimport\s+(?P<dotted>{PACKAGE}(?:\.\w+)+)"
)
"""An import written in a shell line or inline code, where no parser reads it as Python."""


def internal(module: str, names: list[str]) -> str | None:
    """The layer path an import reaches, or ``None`` when it imports public names only."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    if len(parts) > 1:
        return module if parts[1] in INTERNAL else None
    reached = [name for name in names if name in INTERNAL]
    return f"{PACKAGE}.{reached[0]}" if reached else None


def python_source(block: blocks.Block) -> str:
    """The block as Python, one line for each of its lines (a session without its output)."""
    if block.language != "pycon":
        return block.source
    lines = []
    for line in block.source.splitlines():
        if line.startswith((">>> ", "... ")):
            lines.append(line[4:])
        else:
            lines.append("")  # ">>>" alone, "..." alone, or the session's output
    return "\n".join(lines)


def python_imports(source: str) -> list[tuple[int, str, list[str]]]:
    """(line in the source, module, names) of each import statement; ``[]`` if not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
    return found


def text_imports(text: str) -> list[tuple[int, str, list[str]]]:
    """(line in the text, module, names) of each import the regular expression finds."""
    found = []
    for match in IMPORT_TEXT.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if match["dotted"]:
            found.append((line, match["dotted"], []))
        else:
            found.append((line, match["module"], re.findall(r"\w+", match["names"])))
    return found


def layer_imports(path: Path, text: str | None = None) -> list[str]:
    """``page:line: import`` for each import of a layer path the page shows."""
    text = path.read_text(encoding="utf-8") if text is None else text
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found: list[tuple[int, str]] = []
    prose = list(text)
    for block in blocks.blocks(path, text):
        if block.language in PYTHON:
            imports = python_imports(python_source(block)) or text_imports(block.source)
        else:
            imports = text_imports(block.source)
        for line, module, names in imports:
            reached = internal(module, names)
            if reached:
                found.append((block.line + line, reached))
        # Blank the block out of the prose, keeping its lines, so inline code is all that is left.
        prose[block.start : block.end] = re.sub(r"[^\n]", " ", text[block.start : block.end])
    rest = "".join(prose)
    for span in INLINE_CODE.finditer(rest):
        base = rest.count("\n", 0, span.start())
        for line, module, names in text_imports(span[1]):
            reached = internal(module, names)
            if reached:
                found.append((base + line, reached))
    return [f"{where}:{line}: imports {reached}" for line, reached in sorted(found)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_import_no_layer_path(page: Path) -> None:
    found = layer_imports(page)
    assert found == [], (
        "the docs import public names only (the package's top level, its top modules, "
        "django_leasejobs.models); a layer folder is internal, see docs/architecture.md:\n"
        + "\n".join(found)
    )


def test_the_internal_folders_are_the_contract_layers_below_the_public_surface() -> None:
    """A new layer folder under the surface is internal too: the list above follows the
    import-linter contract (the top three lines are the public names, the faces and the
    surface; ``models`` stays public)."""
    below = {
        module.removeprefix(f"{PACKAGE}.")
        for layer in contract_layers()[3:]
        for group in layer
        for module in group
    }
    folders = {name for name in below if (ROOT / PACKAGE / name / "__init__.py").exists()}
    assert folders - {"models"} == INTERNAL


def page(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return [found.removeprefix(f"{path}:") for found in layer_imports(path)]


def test_each_kind_of_documented_import_is_found_with_its_line(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "# A page",  # 1
            "",
            "```python",  # 3
            "from django_leasejobs import job, Worker",
            "from django_leasejobs.runtime.worker import Worker",  # 5
            "```",
            "",
            "```pycon",  # 8
            ">>> from django_leasejobs import (",
            "...     protocol,",  # 10
            "... )",
            "output",
            "```",
            "",
            "```sh",  # 15
            'python -c "import django_leasejobs.upkeep.pruning"',
            "```",
            "",
            "Call it as `from django_leasejobs.core.conf import settings` does, or",  # 19
            "`from django_leasejobs import schedules` (public) and `django_leasejobs.db` (prose).",
        ]
    )
    assert page(tmp_path, text) == [
        "5: imports django_leasejobs.runtime.worker",
        "9: imports django_leasejobs.protocol",
        "16: imports django_leasejobs.upkeep.pruning",
        "19: imports django_leasejobs.core.conf",
    ]


def test_public_imports_pass(tmp_path: Path) -> None:
    text = """\
```python
from django_leasejobs import JobContext, Worker, job, operations, schedules, workflows
from django_leasejobs.models import Job
from django_leasejobs.stats import collect
import django_leasejobs.testing
```

`from django_leasejobs.conf import settings`
"""
    assert page(tmp_path, text) == []
