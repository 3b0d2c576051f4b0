"""Collects the samples of README.md and docs/*.md as tests (Sybil): see tests/docsamples/.

Each page is one collected file; its samples run in order, as a reader would try them, in one
namespace and on one database (the test database, in autocommit, flushed afterwards).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sybil import Sybil

from tests.docsamples import parse
from tests.docsamples.blocks import PAGES
from tests.docsamples.project import DocProject


@pytest.fixture(scope="module")
def doc_project(django_db_setup: None, django_db_blocker: object) -> Iterator[DocProject]:
    """A page's project: the test database unblocked for the page, restored afterwards."""
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        project = DocProject()
        project.begin()
        try:
            yield project
        finally:
            project.end()


pytest_collect_file = Sybil(
    parsers=[parse], patterns=list(PAGES), fixtures=["doc_project"]
).pytest()
