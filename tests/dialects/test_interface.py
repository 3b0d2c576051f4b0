"""The dialect's interface is the operations the layers above call, and its docs say so.

``base.OPERATIONS`` names the public methods of every dialect (test_dialect.py); the package's
and the base module's docstrings list the same; each takes the alias first; and each is called
from outside ``dialects/`` (an operation nobody calls is a step, and private).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import django_leasejobs
from django_leasejobs import dialects
from django_leasejobs.dialects import base
from django_leasejobs.dialects.base import dialect as base_dialect

PACKAGE = Path(django_leasejobs.__file__).parent


def listed(docstring: str) -> set[str]:
    """The operations a docstring lists: its names from ``insert`` to the list's last one, the
    one before its first full stop."""
    start = docstring.index("``insert``")
    return set(re.findall(r"``(\w+)``", docstring[start : docstring.index(". ", start)]))


def test_the_docstrings_list_the_operations() -> None:
    assert dialects.__doc__ is not None
    assert base_dialect.__doc__ is not None
    assert listed(dialects.__doc__) == set(base.OPERATIONS)
    assert listed(base_dialect.__doc__) == set(base.OPERATIONS)


def test_every_operation_alias_comes_first() -> None:
    for name in base.OPERATIONS:
        parameters = list(inspect.signature(getattr(dialects.Dialect, name)).parameters)
        assert parameters[:2] == ["self", "alias"], name


def test_every_operation_is_called_from_outside_the_dialects() -> None:
    outside = "\n".join(
        path.read_text()
        for path in PACKAGE.rglob("*.py")
        if "dialects" not in path.relative_to(PACKAGE).parts
    )
    called = set(re.findall(r"\.(\w+)\(", outside))
    assert set(base.OPERATIONS) - called == set()
