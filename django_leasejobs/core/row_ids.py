"""Row ids (and other bounded whole numbers) read from text: a URL, a query string, a cursor,
a command line.

One reading for the admin, the API and the commands: ASCII digits only (``str.isdigit`` also
takes a superscript two, which ``int()`` refuses), and the length checked before ``int()``,
which refuses more than 4,300 digits with a ``ValueError``. A number past the key column's
range is no id, so it is never sent to the database (which would refuse it with an error).
"""

from __future__ import annotations

MAX_ID = 2**63 - 1
"""The largest id any database's key column holds."""


def whole_number(text: str, most: int) -> int | None:
    """``text`` as a whole number from 0 to ``most``, or None."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > len(str(most)):
        return None
    value = int(text)
    return value if value <= most else None


def row_id(text: str) -> int | None:
    """``text`` as a row id (0 to ``MAX_ID``: 0 matches no row), or None."""
    return whole_number(text, MAX_ID)
