"""Collects the samples of README.md and the docs' pages as tests (Sybil): see tests/docsamples/.

Each page is one collected file; its samples run in order, as a reader would try them, in one
namespace and on one database (the test database, in autocommit, flushed afterwards).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from sybil import Sybil

from tests.docsamples import parse
from tests.docsamples.blocks import PAGES
from tests.docsamples.project import DocProject

ORIGINAL = copy.deepcopy(settings.DATABASES["default"])
"""The project's database settings before pytest-django points them at the test database."""


@pytest.fixture(scope="session")
def doc_database(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """The test database, for the pages: pytest-django creates it only for tests that ask
    for it (a mark or its db fixtures), which a run of the pages alone does not contain."""
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    test_name = ORIGINAL.get("TEST", {}).get("NAME") or f"test_{ORIGINAL['NAME']}"
    with django_db_blocker.unblock():
        created = None
        if connection.settings_dict["NAME"] != test_name:
            created = setup_databases(verbosity=0, interactive=False, aliases={"default"})
        # Never the project's own database: the pages write to it and flush it.
        assert connection.settings_dict["NAME"] == test_name, connection.settings_dict["NAME"]
        yield
        if created is not None:
            teardown_databases(created, verbosity=0)


@pytest.fixture(scope="module")
def doc_project(doc_database: None, django_db_blocker: Any) -> Iterator[DocProject]:
    """A page's project: the test database unblocked for the page, restored afterwards."""
    with django_db_blocker.unblock():
        project = DocProject()
        project.begin()
        try:
            yield project
        finally:
            project.end()


pytest_collect_file = Sybil(
    parsers=[parse], patterns=list(PAGES), fixtures=["doc_project"]
).pytest()
