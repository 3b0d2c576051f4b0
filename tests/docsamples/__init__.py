"""The samples of README.md and the docs' pages, collected and run by pytest through Sybil.

The root ``conftest.py`` hands the pages to :func:`parse`; ``blocks`` finds the fenced blocks
and their markers, ``runners`` runs each kind, ``pages`` runs a page's tests under pytest,
``project`` stands for the reader's project around a page. ``tests/docs/test_samples.py``
checks that every block is either run or says why not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sybil import Region

from . import blocks, pages, runners


def parse(document: Any) -> Iterator[Region]:
    """One region per block that runs, in page order (they share the page's namespace)."""
    path = Path(document.path)
    page = pages.test_page(path)
    for block in blocks.blocks(path, document.text):
        if block.is_directive or not block.runs:
            continue
        if page is not None and page.owns(block):
            yield Region(block.start, block.end, (block, page), evaluate_page_test)
        else:
            yield Region(block.start, block.end, block, runners.evaluate)


def evaluate_page_test(example: Any) -> None:
    block, page = example.parsed
    if block.marker == "run on":
        runners.skip_unless(block.reason)
    pages.check(block, page, example.namespace["doc_project"])
