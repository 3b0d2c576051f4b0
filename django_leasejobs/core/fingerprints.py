"""Dead letters grouped by error: a fingerprint read from an attempt's stored error text.

An operator fixes a bug once and replays everything it killed, so the dead letters one bug
made must share a key while deploys, data and addresses change. The key is the final
exception's class and the module and function names of the handler's innermost frames
(``FRAMES``). It is read from the stored text, never from a live exception, so a row written
before fingerprints existed gets, when backfilled, the key a new row of the same bug gets.

Left out on purpose:

* line numbers: they move with every deploy that touches the file above the raise;
* the directories above a module: release directories and virtualenvs differ per deploy, so
  only the import path inside ``site-packages`` (or a file's package and name) is kept;
* the frames of this library (the worker that called the handler): a refactor of the worker is
  not a new bug;
* the message: it carries the data (ids, amounts, memory addresses, user input) that would
  split one bug into as many groups as rows, and no normalisation recognises every kind of
  data. Two different errors raised as one class in one function share a group; the group page
  shows the latest message, and a letter's own page has its whole history.

A failure without a traceback (an expired lease, an unregistered job) is keyed by its kind and,
when its error starts with a short label before a colon, that label.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FRAMES = 3
"""Innermost frames kept: the raise site and two callers. One frame would merge every caller of
a shared helper (each network error of a client library); the whole stack would split one bug
by the paths that reach it."""

LENGTH = 16
"""Hex digits kept of the SHA-256 digest: 64 bits, short enough to paste into a command."""

VERSION = "v1"
"""Part of the digest: a change of the rules changes every key (``deadletters fingerprint
--all`` computes them again)."""

_HEADER = re.compile(r"(Exception Group )?Traceback \(most recent call last\):$")
_FRAME = re.compile(r'File "(?P<path>[^"]*)", line \d+, in (?P<function>.+)$')
_CLASS = re.compile(r"[A-Za-z_][\w.]*")
_GROUP_PREFIX = re.compile(r"^\s*(?:[|+] ?)+")
"""The margin of an exception group's traceback (``  | ``), before each line of it."""
_PYTHON_DIR = re.compile(r"python\d+(\.\d+)?t?")
_LIBRARY = "django_leasejobs"


@dataclass(frozen=True)
class Signature:
    """What a dead letter's key is made of, and the key."""

    exception: str
    frames: tuple[tuple[str, str], ...]
    """(module, function), outermost first."""
    kind: str = ""
    """Only for a failure without a traceback."""
    where: tuple[str, str] | None = field(default=None, compare=False)
    """The innermost frame outside this library, which the label names: the user's code that
    was running, even when the raise itself was inside the library (not part of the key)."""

    @property
    def digest(self) -> str:
        parts = [VERSION, self.exception, self.kind, *(f"{m}:{f}" for m, f in self.frames)]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:LENGTH]

    @property
    def label(self) -> str:
        """One line for people: the class and where it was raised."""
        name = self.exception or self.kind or "unknown error"
        if not self.frames:
            return f"{name} ({self.kind})" if self.exception and self.kind else name
        if self.where is None:
            return f"{name} in the worker ({_LIBRARY})"
        module, function = self.where
        return f"{name} in {module}.{function}"


def of_errors(errors: Any) -> Signature:
    """The signature of a dead letter's error history: its last attempt's error."""
    last = errors[-1] if isinstance(errors, list) and errors else {}
    if not isinstance(last, Mapping):
        last = {"error": str(last)}
    return of_error(
        str(last.get("error") or ""), str(last.get("traceback") or ""), str(last.get("kind") or "")
    )


def of_error(error: str, traceback: str, kind: str = "") -> Signature:
    """The signature of one attempt's error text, traceback text and failure kind."""
    found = _parse(_without_message(traceback, error))
    if found is not None:
        return found
    return Signature(exception=_error_label(error), frames=(), kind=kind or "error")


def _without_message(traceback: str, error: str) -> str:
    """The traceback without the final exception's message, which it ends with.

    A message may hold anything, lines that look like frames or headers included; cut off, it
    cannot be read as structure. (A note added to the exception, or a message longer than the
    stored text, keeps it in: then only the lines above the exception line are read.)
    """
    text = traceback.rstrip("\n")
    _, colon, message = error.partition(": ")
    message = message.rstrip("\n")
    if colon and message and text.endswith(message):
        return text[: -len(message)]
    return text


def _parse(traceback: str) -> Signature | None:
    lines = traceback.splitlines()
    if "Exception Group Traceback" in traceback:
        # Its last sub-exception's block is read, which is the same for the same bug.
        lines = [_GROUP_PREFIX.sub("", line) for line in lines]
    starts = [i for i, line in enumerate(lines) if _HEADER.search(line.strip())]
    frames: list[tuple[str, str, bool]] = []
    exception = ""
    for line in lines[starts[-1] + 1 if starts else 0 :]:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        frame = _FRAME.match(stripped)
        if frame and indent >= 2:
            path = frame["path"]
            frames.append((_module(path), frame["function"].strip(), _is_library(path)))
        elif stripped and indent <= 1:
            match = _CLASS.match(stripped)
            rest = stripped[match.end() :] if match else ""
            if match and (not rest or rest.startswith(":")):
                exception = match.group()
            break
    if not frames and not exception:
        return None
    theirs = [(module, function) for module, function, ours in frames if not ours]
    return Signature(
        exception=exception,
        frames=_handler_frames(frames),
        where=theirs[-1] if theirs else None,
    )


def _handler_frames(frames: list[tuple[str, str, bool]]) -> tuple[tuple[str, str], ...]:
    """The innermost ``FRAMES`` below the library's last frame (all, if the library raised)."""
    library = [i for i, (_, _, ours) in enumerate(frames) if ours]
    handler = frames[library[-1] + 1 :] if library else frames
    chosen = handler or frames
    return tuple((module, function) for module, function, _ in chosen[-FRAMES:])


def _module(path: str) -> str:
    """A file's import path without the directories a deploy chooses."""
    if path.startswith("<"):
        return path  # <string>, <frozen importlib._bootstrap>
    parts = [p for p in re.split(r"[\\/]", path) if p]
    installed = [i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages")]
    if installed:
        kept = parts[installed[-1] + 1 :]
    else:
        kept = parts[-2:]
        if len(kept) == 2 and _PYTHON_DIR.fullmatch(kept[0]):
            kept = kept[1:]  # the standard library: /usr/lib/python3.12/socket.py
    if kept:
        kept[-1] = re.sub(r"\.pyc?$", "", kept[-1])
    if len(kept) > 1 and kept[-1] == "__init__":
        kept = kept[:-1]
    return ".".join(kept)


def _is_library(path: str) -> bool:
    return _LIBRARY in re.split(r"[\\/]", path)


def _error_label(error: str) -> str:
    """The words before an error's first colon, when they read as a label, not data."""
    head, colon, _ = error.partition(": ")
    head = head.strip()
    if colon and head and len(head) <= 80 and not re.search(r"[\d'\"`<>()\[\]{}]", head):
        return head
    return ""
