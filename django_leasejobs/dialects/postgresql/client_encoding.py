"""Refuse text that a connection's client encoding could change on its way to the database.

Values travel as driver parameters, so no text can change a statement, but the driver still
encodes each one in the session's ``client_encoding``, and Python's codecs and PostgreSQL's
conversion tables disagree beyond ASCII: SJIS and EUC_JP turn ``¥`` into the byte of ``\\``
and ``‾`` into ``~`` (a dedupe key ``¥`` would then find the job keyed ``\\``), and the two
sides map ``£`` differently in EUC_JP. ASCII is the same in every encoding PostgreSQL offers a
client, so on a session that is not UTF-8 text beyond ASCII is refused, with the field and the
character, before anything is written. Django opens every connection in UTF-8.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from ...errors import JobValidationError

_UTF8 = codecs.lookup("utf-8").name


def codec(connection: BaseDatabaseWrapper) -> str | None:
    """The Python codec a PostgreSQL session encodes text with when it is not UTF-8; None for
    a UTF-8 session and a connection not open yet (Django opens it in UTF-8)."""
    if connection.connection is None:
        return None
    info = getattr(connection.connection, "info", None)
    name = getattr(info, "encoding", None)  # psycopg 3: already Python's name
    if name is None:  # psycopg2
        from psycopg2.extensions import encodings

        name = encodings.get(connection.connection.encoding)
    if name is None:
        return None
    found = codecs.lookup(name).name
    return None if found == _UTF8 else found


def check_sendable(values: Iterable[tuple[str, Any]], connection: BaseDatabaseWrapper) -> None:
    """Raise ``JobValidationError`` if a text value of ``(field, value)`` pairs might not reach
    the database exactly as given over ``connection``."""
    name = codec(connection)
    if name is None:
        return
    for field, value in values:
        if isinstance(value, str) and not value.isascii():
            char = next(c for c in value if not c.isascii())
            raise JobValidationError(
                f"{field} {value!r}: on a session whose client_encoding is {name}, only ASCII "
                f"text reaches the database exactly, not {char!r}; nothing was enqueued. "
                "Use UTF8 (Django's default)."
            )


def require_utf8(connection: BaseDatabaseWrapper, action: str) -> None:
    """Refuse ``action`` on a session that is not UTF-8: it copies stored text, which the
    server already sent through the client encoding (``¥`` reads as ``\\`` in SJIS)."""
    name = codec(connection)
    if name is not None:
        raise JobValidationError(
            f"{action} reads stored text back and sends it again: it needs a UTF8 session, not "
            f"client_encoding {name} (Django's default is UTF8); nothing was changed."
        )


def check_rows(rows: Iterable[dict[str, Any]], connection: BaseDatabaseWrapper) -> None:
    """``check_sendable`` for each row of a bulk insert (field name to value)."""
    if codec(connection) is None:
        return
    for row in rows:
        check_sendable(row.items(), connection)
