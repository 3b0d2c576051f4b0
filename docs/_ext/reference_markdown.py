"""The reference pages' generated text: rows of ``reference_data`` and the code's docstrings,
written as Markdown.

The text is written into the pages themselves (``docs/generate.py``), between markers, so that
a page reads the same on a code host, in an editor and in the built site, and a test
(``tests/docs/test_reference.py``) fails when a page no longer says what the code says now.
Each block is named by a marker ``<!-- generated: KIND ARGUMENTS -->``; ``render`` turns it
into lines. Docstrings are reST-flavoured (````code````, ``:func:`name```, ``::`` before an
example): they become Markdown here, and ``docs/page.md#anchor`` becomes a relative link.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import json
import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import reference_data as data
from django.utils.module_loading import import_string

DOCS = Path(__file__).resolve().parent.parent
DOC_LINK = re.compile(r"docs/([\w-]+)\.md(#[\w-]+)?")
NOT_RUN = "<!-- not run: {} -->"


class Page:
    """Rendering for one page: links are relative to its folder (``depth`` levels down)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def text(self, value: str) -> str:
        """A docstring's text as Markdown, links relative to this page."""
        value = re.sub(r":\w+:`~?([^`]+)`", r"``\1``", value)
        value = re.sub(r"``([^`]+)``", r"`\1`", value)
        return DOC_LINK.sub(
            lambda m: f"[{m.group(0)}]({'../' * self.depth}{m.group(1)}.md{m.group(2) or ''})",
            value,
        )

    def cell(self, value: str) -> str:
        return self.text(" ".join(value.split())).replace("|", "\\|")

    def docstring(self, value: str, where: str) -> list[str]:
        """A docstring's paragraphs; a ``::`` paragraph's indented example becomes a fenced
        block that says it is not run (the code's own tests run it)."""
        lines: list[str] = []
        source = inspect.cleandoc(value).splitlines()
        index = 0
        while index < len(source):
            line = source[index]
            if line.rstrip().endswith("::") and not line.strip().startswith(".."):
                lines.append(self.text(line.rstrip()[:-1]))
                index += 1
                example = []
                while index < len(source) and (not source[index] or source[index][0] == " "):
                    example.append(source[index])
                    index += 1
                lines += ["", NOT_RUN.format(f"an example from the docstring of {where}")]
                lines += ["```python", *inspect.cleandoc("\n".join(example)).splitlines(), "```"]
                lines.append("")
                continue
            lines.append(self.text(line))
            index += 1
        return lines

    # ------------------------------------------------------------------------ tables

    def settings(self) -> list[str]:
        lines = ["| setting | default | meaning |", "|---|---|---|"]
        for row in data.settings():
            lines.append(f"| `{row.name}` | {code(row.default)} | {self.cell(row.doc)} |")
        return lines

    def job_options(self) -> list[str]:
        lines = ["| option | type | default | meaning |", "|---|---|---|---|"]
        for row in data.job_options():
            kind = self.cell(f"``{row.annotation}``")
            lines.append(f"| `{row.name}` | {kind} | {code(row.default)} | {self.cell(row.doc)} |")
        return lines

    def model_fields(self, model: str) -> list[str]:
        lines = ["| field | type | null | default | meaning |", "|---|---|---|---|---|"]
        for row in data.fields(import_string(model)):
            default = "" if row.default is None else code(row.default)
            null = "yes" if row.null else ""
            lines.append(
                f"| `{row.name}` | {row.kind} | {null} | {default} | {self.cell(row.help_text)} |"
            )
        return lines

    def choices(self, choices: str) -> list[str]:
        lines = ["| value | meaning, and what moves a job out of it |", "|---|---|"]
        for row in data.choices(import_string(choices)):
            lines.append(f"| `{row.value}` | {self.cell(row.doc)} |")
        return lines

    def commands(self) -> list[str]:
        lines: list[str] = []
        for command in data.commands():
            lines += self.command(command, f"manage.py {command.name}", "##")
        return lines[:-1]

    def command(self, command: data.Command, title: str, level: str) -> list[str]:
        lines = [f"{level} `{title}`", "", self.text(command.help), ""]
        lines += [NOT_RUN.format("its usage, from the command's parser")]
        lines += ["```text", command.usage, "```", ""]
        if command.arguments:
            lines += ["| argument | default | meaning |", "|---|---|---|"]
            for argument in command.arguments:
                name = f"{argument.flags} {argument.metavar}".strip()
                default = "" if argument.default is None else code(argument.default)
                lines.append(f"| `{name}` | {default} | {self.cell(argument.help)} |")
            lines.append("")
        for sub in command.subcommands:
            lines += self.command(sub, f"{title} {sub.name}", level + "#")
        return lines

    def checks(self) -> list[str]:
        described = data.check_descriptions()
        emitted = data.check_ids_in_code()
        lines = ["| id | level | what it reports |", "|---|---|---|"]
        ids = emitted | {i for i in described if i.startswith("leasejobs.")}
        for ident in sorted(ids, key=lambda i: (i[10] != "E", i)):
            level = "error" if ident[10] == "E" else "warning"
            if ident not in emitted:
                level = "retired"
            lines.append(f"| `{ident}` | {level} | {self.cell(described.get(ident, ''))} |")
        return lines

    def http_api(self) -> list[str]:
        lines = ["| method | path | operation | what it does |", "|---|---|---|---|"]
        for row in data.api_operations():
            what = row.summary + (f". {row.description}" if row.description else "")
            lines.append(
                f"| {row.method} | `{row.path}` | `{row.operation_id}` | {self.cell(what)} |"
            )
        return lines

    # ------------------------------------------------------------------------ shipped files

    def file(self, path: str, language: str) -> list[str]:
        """A file shipped under docs/ (``monitoring/leasejobs-alerts.yml``), shown whole."""
        text = (DOCS / path).read_text(encoding="utf-8").rstrip("\n")
        marker = NOT_RUN.format(f"docs/{path}, checked by a test of its own")
        return [marker, f"```{language}", *text.splitlines(), "```"]

    def dashboard(self, path: str) -> list[str]:
        """A Grafana dashboard's panels, each with its queries."""
        dashboard = json.loads((DOCS / path).read_text(encoding="utf-8"))
        lines = ["| panel | queries |", "|---|---|"]
        for panel in dashboard["panels"]:
            queries = "<br>".join(f"`{t['expr']}`" for t in panel["targets"])
            escaped = queries.replace("|", "\\|")
            lines.append(f"| {self.cell(panel['title'])} | {escaped} |")
        return lines

    # ------------------------------------------------------------------------ the API

    def api(self, dotted: str, *members: str) -> list[str]:
        """An object (class, function, exception, property) and the members named, or a
        module and every name of its ``__all__``: a heading with its signature, then its
        docstring."""
        target, name = resolve(dotted)
        if inspect.ismodule(target):
            lines = [*self.docstring(target.__doc__ or "", dotted), ""]
            for name in target.__all__:
                public = [n for n, v in vars(getattr(target, name)).items() if documented(n, v)]
                lines += self.entry(getattr(target, name), name, "###", public)
            return lines[:-1]
        return self.entry(target, name, "###", list(members))[:-1]

    def entry(self, target: Any, name: str, level: str, members: list[str]) -> list[str]:
        owner = target if inspect.isclass(target) else None
        lines = [f"{level} `{heading(target, name)}`", ""]
        lines += [*self.docstring(inspect.getdoc(target) or "", name), ""]
        attribute_docs = attributes(owner) if owner is not None else {}
        for member in members:
            title = f"{name}.{member}"
            if member in attribute_docs:
                lines += [f"{level}# `{title}`", "", *self.docstring(attribute_docs[member], title)]
                lines.append("")
                continue
            lines += self.entry(getattr(owner, member), title, level + "#", [])
        return lines


def resolve(dotted: str) -> tuple[Any, str]:
    """The object a dotted path names (the longest importable module, then attributes), and
    the name to show: ``Class.method`` for a class's member, else its own name."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        owner = None
        for part in parts[end:]:
            # A module's names through getattr: the package loads some on first use.
            get = getattr if inspect.ismodule(target) else inspect.getattr_static
            owner, target = target, get(target, part)
        if isinstance(target, staticmethod | classmethod):
            target = target.__func__
        if inspect.isclass(owner):
            return target, f"{owner.__name__}.{parts[-1]}"
        return target, parts[-1]
    raise ImportError(f"cannot import {dotted}")


def attributes(cls: type) -> dict[str, str]:
    """Attribute docstrings of a class: the string after ``NAME = ...`` in its body, or after
    ``self.NAME = ...`` in an ``__init__`` of it or of a base."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("django_leasejobs"):
            continue  # builtins and Django's own bases: not documented here
        try:  # a dataclass's __init__ has no source: its fields are in the class body
            source = inspect.getsource(klass.__init__) if "__init__" in vars(klass) else ""
        except OSError:
            source = ""
        if source:
            body = ast.parse(inspect.cleandoc("\n" + source)).body[0].body  # type: ignore[attr-defined]
            for statement, following in itertools.pairwise(body):
                target = getattr(statement, "target", None) or next(
                    iter(getattr(statement, "targets", [])), None
                )
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    found[target.attr] = inspect.cleandoc(following.value.value)
        found.update(data.attribute_docs(klass))
    return found


def documented(name: str, value: Any) -> bool:
    """A public member with its own docstring (what autodoc's ``members`` showed)."""
    if name.startswith("_"):
        return False
    if isinstance(value, property | cached_property | staticmethod | classmethod):
        return bool(value.__doc__)
    return inspect.isfunction(value) and bool(value.__doc__)


def heading(target: Any, name: str) -> str:
    """``name(signature) -> returns`` for a callable, ``name`` for a property, ``name`` and
    its base for an exception; a class made by the library (internal fields) has no call."""
    if isinstance(target, property | cached_property):
        return f"{name} (property)"
    if inspect.isclass(target) and issubclass(target, BaseException):
        return f"exception {name}({target.__mro__[1].__name__})"
    if inspect.isclass(target):
        call = signature(target.__init__, returns=False)
        return f"class {name}" + ("" if "_" in re.findall(r"[(,] ?(_?)", call) else call)
    prefix = "async " if inspect.iscoroutinefunction(target) else ""
    return f"{prefix}{name}{signature(target)}"


def signature(function: Callable[..., Any], *, returns: bool = True) -> str:
    """``(a: int, *, b: str = 'x') -> T`` without ``self``, annotations as the code writes
    them (they are strings under ``from __future__ import annotations``)."""
    found = inspect.signature(function)
    parts, keyword_only = [], False
    for parameter in found.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        kind = parameter.kind
        if kind is parameter.KEYWORD_ONLY and not keyword_only:
            parts.append("*")
        keyword_only = keyword_only or kind in (parameter.KEYWORD_ONLY, parameter.VAR_POSITIONAL)
        text = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(kind, "")
        text += parameter.name
        if parameter.annotation is not parameter.empty:
            text += f": {annotation(parameter.annotation)}"
        if parameter.default is not parameter.empty:
            default = parameter.default
            shown = "<factory>" if repr(default) == "<factory>" else repr(default)
            text += f" = {shown}" if ": " in text else f"={shown}"
        parts.append(text)
    result = f"({', '.join(parts)})"
    if returns and found.return_annotation is not found.empty:
        result += f" -> {annotation(found.return_annotation)}"
    return result


def annotation(value: Any) -> str:
    return value if isinstance(value, str) else inspect.formatannotation(value)


def code(value: Any) -> str:
    text = repr(value)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


KINDS: dict[str, Callable[..., list[str]]] = {
    "settings": Page.settings,
    "job-options": Page.job_options,
    "model-fields": Page.model_fields,
    "choices": Page.choices,
    "commands": Page.commands,
    "checks": Page.checks,
    "http-api": Page.http_api,
    "api": Page.api,
    "file": Page.file,
    "dashboard": Page.dashboard,
}


def render(kind: str, arguments: list[str], depth: int) -> list[str]:
    """The lines of one generated block: ``kind`` and its ``arguments`` as the marker says."""
    if kind not in KINDS:
        raise ValueError(f"unknown generated block {kind!r}: one of {', '.join(KINDS)}")
    return KINDS[kind](Page(depth), *arguments)
