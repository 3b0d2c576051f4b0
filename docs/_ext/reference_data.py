"""The reference's facts, read from the code: the code is the one source of truth.

Each function returns plain rows, so ``reference_markdown`` writes them into the pages and
``tests/docs/test_reference.py`` checks that nothing the code defines is left undocumented.
Call them after ``django.setup()``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
import pkgutil
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

CHECK_ID = re.compile(r"leasejobs\.[EWCI]\d{3}")
# Django's own options, present on every command: documented by Django, not here.
DJANGO_OPTIONS = {
    "-h",
    "--help",
    "--version",
    "-v",
    "--verbosity",
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
    "--skip-checks",
}

DJANGO_USAGE = re.compile(
    r" \[(-h|--version|-v \{[^}]*\}|--settings SETTINGS|--pythonpath PYTHONPATH|--traceback"
    r"|--no-color|--force-color|--skip-checks)\]"
)


def package_dir() -> Path:
    import django_leasejobs

    return Path(django_leasejobs.__file__).parent


# ----------------------------------------------------------------------------- settings


@dataclass
class Setting:
    name: str
    default: Any
    doc: str


def settings() -> list[Setting]:
    """Every ``LEASEJOBS_*`` setting: ``conf.DEFAULTS`` and its typed property's docstring."""
    from django_leasejobs.core import conf

    rows = []
    for name, default in conf.DEFAULTS.items():
        prop = vars(conf.Settings).get(name)
        doc = prop.__doc__ if isinstance(prop, cached_property) else None
        rows.append(Setting(conf.PREFIX + name, default, inspect.cleandoc(doc or "")))
    return rows


# ----------------------------------------------------------------------------- @job


@dataclass
class Option:
    name: str
    annotation: str
    default: Any
    doc: str


def _described(docstring: str) -> dict[str, str]:
    """``name``: text lines of a docstring (continuation lines indented or not; each may be a
    ``- `` list item), by name."""
    found: dict[str, str] = {}
    current = None
    for line in inspect.cleandoc(docstring).splitlines():
        match = re.match(r"(?:- )?``(\w+)``: (.*)", line)
        if match:
            current = match.group(1)
            found[current] = match.group(2)
        elif current and line.strip():
            found[current] += " " + line.strip()
        else:
            current = None
    return found


def job_options() -> list[Option]:
    """``@job``'s keyword options: ``JobSpec``'s signature, described by ``job``'s docstring."""
    from django_leasejobs import jobs
    from django_leasejobs.core import registry

    described = _described(jobs.job.__doc__ or "")
    signature = inspect.signature(registry.JobSpec.__init__)
    rows = []
    for name, parameter in signature.parameters.items():
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        annotation = parameter.annotation
        text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
        rows.append(Option(name, text, parameter.default, described.get(name, "")))
    return rows


# ----------------------------------------------------------------------------- models


@dataclass
class Field:
    name: str
    kind: str
    null: bool
    default: Any
    help_text: str


def fields(model: Any) -> list[Field]:
    """A model's concrete fields, as Django describes them."""
    from django.db.models import NOT_PROVIDED

    rows = []
    for field in model._meta.concrete_fields:
        default = field.default
        if default is NOT_PROVIDED:
            default = getattr(field, "db_default", NOT_PROVIDED)
        if default is NOT_PROVIDED:
            default = None
        elif callable(default):
            default = f"{default.__name__}()"
        kind = field.get_internal_type()
        if field.is_relation:
            kind = f"{kind} to {field.related_model.__name__}"
        rows.append(Field(field.name, kind, field.null, default, str(field.help_text)))
    return rows


@dataclass
class Choice:
    value: str
    doc: str


def attribute_docs(cls: type) -> dict[str, str]:
    """The string literal after each ``NAME = ...`` of a class body (attribute docstrings)."""
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    found = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[statement.targets[0].id] = inspect.cleandoc(following.value.value)
    return found


def choices(cls: Any) -> list[Choice]:
    """A ``TextChoices``' values, each with the docstring written under it."""
    docs = attribute_docs(cls)
    return [Choice(member.value, docs.get(member.name, "")) for member in cls]


# ----------------------------------------------------------------------------- commands


@dataclass
class Argument:
    flags: str
    metavar: str
    default: Any
    help: str


@dataclass
class Command:
    name: str
    help: str
    usage: str
    arguments: list[Argument]
    subcommands: list[Command]


def command_names() -> list[str]:
    path = package_dir() / "management" / "commands"
    return sorted(info.name for info in pkgutil.iter_modules([str(path)]))


def _command(name: str, parser: argparse.ArgumentParser, help_text: str) -> Command:
    arguments, subcommands = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for sub, subparser in action.choices.items():
                subcommands.append(_command(sub, subparser, helps.get(sub, "")))
            continue
        if set(action.option_strings) & DJANGO_OPTIONS:
            continue
        flags = ", ".join(action.option_strings) or action.dest
        metavar = ""
        if action.option_strings and action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
        if action.choices and not isinstance(action.choices, dict):
            metavar = "{" + ",".join(map(str, action.choices)) + "}"
        default = None if action.default in (argparse.SUPPRESS, False) else action.default
        if action.nargs == 0:  # a flag: its default is "off" (or "on" for --no-... flags)
            default = None
        arguments.append(Argument(flags, str(metavar), default, action.help or ""))
    usage = " ".join(parser.format_usage().replace("usage: ", "", 1).split())
    usage = DJANGO_USAGE.sub("", usage)
    return Command(name, help_text, usage, arguments, subcommands)


def commands() -> list[Command]:
    """Every management command of the app, from its own argparse parser."""
    from django.core.management import load_command_class

    rows = []
    for name in command_names():
        command = load_command_class("django_leasejobs", name)
        parser = command.create_parser("manage.py", name)
        rows.append(_command(name, parser, str(command.help)))
    return rows


def option_flags(command: Command) -> set[str]:
    """Every option string of a command and its subcommands."""
    flags = {flag for argument in command.arguments for flag in argument.flags.split(", ")}
    for sub in command.subcommands:
        flags |= option_flags(sub)
    return {flag for flag in flags if flag.startswith("-")}


# ----------------------------------------------------------------------------- checks


def check_ids_in_code() -> set[str]:
    """Every ``id="leasejobs.X000"`` a check message of the package carries."""
    found = set()
    for path in package_dir().rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "id"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and CHECK_ID.fullmatch(node.value.value)
            ):
                found.add(node.value.value)
    return found


def check_descriptions() -> dict[str, str]:
    """What each check id reports, from the check modules' docstrings.

    Two forms are read: a table row ``| ``leasejobs.X000`` | what |`` and a list item
    ``- ``leasejobs.X000``: what`` (continued on indented lines). An entry naming several ids
    points elsewhere and is skipped.
    """
    found: dict[str, str] = {}
    for path in sorted(package_dir().rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        current = None
        for line in docstring.splitlines():
            row = re.match(r"\| ``(leasejobs\.\w+)`` \| (.*) \|$", line)
            item = re.match(r"- ``(leasejobs\.\w+)``: (.*)", line)
            if row or item:
                match = row or item
                assert match is not None
                current = match.group(1) if item else None
                found[match.group(1)] = match.group(2).strip()
            elif current and line.startswith("  "):
                found[current] += " " + line.strip()
            else:
                current = None
    return found


# ----------------------------------------------------------------------------- HTTP API


@dataclass
class Operation:
    method: str
    path: str
    operation_id: str
    summary: str
    description: str


def api_operations() -> list[Operation]:
    """The HTTP API's operations, from its OpenAPI document."""
    from django_leasejobs.api import schema

    rows = []
    for path, methods in schema.document()["paths"].items():
        for method, operation in methods.items():
            rows.append(
                Operation(
                    method.upper(),
                    path,
                    operation.get("operationId", ""),
                    operation.get("summary", ""),
                    operation.get("description", ""),
                )
            )
    return rows
