"""A job's error history, bounded: what a failed attempt writes to ``errors`` and ``last_error``.

A job may fail many times (a large ``max_attempts``, a lease lost in a loop), and its error
text comes from the handler. Unbounded, every failure made the row larger, and every reader
(the admin, the API, ``get_result``) loaded it whole. So the history keeps the entries of the
first ``FIRST`` attempts (how it started) and of the last ``LAST`` (how it is going), with one
``{"dropped": N}`` entry between them counting the others; and each error text and traceback
is cut in its middle, where a marker says how many bytes went. Every write that appends to
the history (``protocol.failures``) calls :func:`appended` and :func:`stored`; the readers (the
admin, the API's document, ``django.tasks`` results) tell the count from an attempt with
:func:`is_dropped`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

FIRST = 3
"""Attempts kept from the start of the history."""
LAST = 20
"""Attempts kept from its end."""
ERROR_BYTES = 8 * 1024
"""The most an attempt's error text (and ``last_error``) takes, in UTF-8 bytes."""
TRACEBACK_BYTES = 32 * 1024
"""The most an attempt's traceback takes, in UTF-8 bytes."""
DROPPED = "dropped"
"""The key of the entry that counts the attempts left out between the first and the last."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""NUL (PostgreSQL's text and jsonb refuse it) and lone surrogates (what ``os.fsdecode`` makes
of badly encoded bytes; no driver encodes them)."""


def _size(text: str) -> int:
    return len(text.encode())


def _cut_line(line: str, limit: int) -> str:
    """A line over ``limit`` bytes as its head and tail around `` [... N bytes cut ...] ``."""
    data = line.encode()
    if len(data) <= limit:
        return line
    room = (limit - len(f" [... {len(data)} bytes cut ...] ")) // 2
    # A cut may fall inside a character: its leftover bytes go with the cut.
    head = data[:room].decode("utf-8", "ignore")
    tail = data[len(data) - room :].decode("utf-8", "ignore")
    return f"{head} [... {len(data) - _size(head) - _size(tail)} bytes cut ...] {tail}"


def _cut_middle(lines: list[tuple[str, int]], limit: int) -> str:
    """The first and last ``lines`` (each as kept, with its size before) that fit, around a
    line of their own that counts the bytes between them.

    The marker line is indented: a traceback's reader (``fingerprints``) skips it as it skips
    a frame's source line, and the lines around it are whole, so no half frame is misread.
    """
    total = sum(size for _, size in lines) + len(lines) - 1
    room = limit - len(f"\n  [... {total} bytes cut ...]\n")
    first, used = 0, -1
    while first < len(lines) and used + 1 + _size(lines[first][0]) <= room // 2:
        used += 1 + _size(lines[first][0])
        first += 1
    last, left = len(lines), room - max(used, 0) + 1  # +1: the tail's last line has no break
    while last > first and 1 + _size(lines[last - 1][0]) <= left:
        left -= 1 + _size(lines[last - 1][0])
        last -= 1
    dropped = lines[first:last]
    # The bytes between the kept head and tail: the dropped lines and the line breaks
    # around them (the marker's own two breaks stand for two of those).
    cut = sum(size for _, size in dropped) + len(dropped) - 1 + (first > 0) + (last < len(lines))
    head = "\n".join(text for text, _ in lines[:first])
    tail = "\n".join(text for text, _ in lines[last:])
    return f"{head}\n  [... {cut} bytes cut ...]\n{tail}"


def stored(text: str, limit: int) -> str:
    """``text`` as the history stores it: storable on every database, at most ``limit`` UTF-8
    bytes.

    A character no database can store becomes U+FFFD: the write that records the failure must
    not fail itself (the worker would retry it for ever, or lose the error). Then lines longer
    than a quarter of the room are cut in their middle (one line alone may take the whole
    room): a traceback's last line is its final exception, and a huge message must not push the
    exception's class out. Then, if the text is still too long, whole lines go from its middle:
    a traceback's first lines say where the chain of errors began, its last the final exception
    and the innermost frames. Each cut leaves a marker that says how many bytes it replaced.
    """
    text = _UNSTORABLE.sub("\ufffd", text)
    if _size(text) <= limit:
        return text
    if "\n" not in text:
        return _cut_line(text, limit)
    lines = [(_cut_line(line, limit // 4), _size(line)) for line in text.split("\n")]
    cut = "\n".join(line for line, _ in lines)
    return cut if _size(cut) <= limit else _cut_middle(lines, limit)


def is_dropped(entry: Any) -> bool:
    """Whether a history entry is the count of attempts left out, not an attempt."""
    return isinstance(entry, Mapping) and DROPPED in entry and "attempt" not in entry


def attempts(history: Any) -> list[Any]:
    """The history's attempt entries, oldest first, without the count of those dropped."""
    if not isinstance(history, list):
        return []
    return [entry for entry in history if not is_dropped(entry)]


def dropped(history: Any) -> int:
    """How many attempts' entries the history left out."""
    if not isinstance(history, list):
        return 0
    return sum(int(entry[DROPPED]) for entry in history if is_dropped(entry))


def appended(history: Any, entry: dict[str, Any]) -> list[Any]:
    """``history`` with ``entry`` added last, bounded: first ``FIRST``, count, last ``LAST``."""
    entries = [*attempts(history), entry]
    left_out = dropped(history)
    if len(entries) > FIRST + LAST:
        left_out += len(entries) - FIRST - LAST
        entries = entries[:FIRST] + entries[-LAST:]
    if not left_out:
        return entries
    return [*entries[:FIRST], {DROPPED: left_out}, *entries[FIRST:]]
