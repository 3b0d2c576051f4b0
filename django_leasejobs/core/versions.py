"""Job versions and renames: the ``@job(version=, upgrade=, aliases=)`` options, checked when the
decorator runs, and the upgrade chain a worker runs before it calls a handler.

A row keeps the version its arguments were written for (``Job.version``). A worker whose
handler is newer brings them up one version at a time (``upgrade[1]`` turns version-1
arguments into version 2, ``upgrade[2]`` version 2 into 3, ...) before the call; the row is
rewritten only by the success write, so a failing upgrade leaves them as they were, for a
replay. Errors here are raised at decoration, so a bad option fails at import, in every
process, rather than in a worker at three in the morning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import JobValidationError
from . import json_values

Upgrader = Callable[[list[Any], dict[str, Any]], Any]
"""``upgrade_v1(args, kwargs) -> (args, kwargs)``: one version's arguments as the next one's."""

UPGRADE_FAILED = "upgrade failed"
"""The error kind of an attempt whose arguments could not be upgraded (dead-lettered at once)."""


class UpgradeError(Exception):
    """An upgrader is missing, raised, or returned something that is not ``(args, kwargs)``."""


def check_version(version: Any) -> int:
    """``version``: an int, 1 or more."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise JobValidationError(f"@job(version=) takes an int of 1 or more, not {version!r}.")
    return version


def check_upgrades(name: str, version: int, upgrade: Any) -> dict[int, Upgrader]:
    """``upgrade``: a dict of version to callable, each key below ``version``, with no gap from
    its lowest key up to ``version - 1`` (a row of any version the dict starts from can reach
    the handler's).

    The lowest key may be above 1: upgraders of versions no row holds any more can be dropped
    (a row still at such a version is dead-lettered, naming the missing upgrader). A
    ``version`` above 1 needs at least ``upgrade[version - 1]``.
    """
    if upgrade is None:
        upgrade = {}
    if not isinstance(upgrade, Mapping):
        raise JobValidationError(
            f"@job(upgrade=) of {name!r} takes a dict of version to function, such as "
            f"{{1: upgrade_v1}}, not {type(upgrade).__name__}."
        )
    checked: dict[int, Upgrader] = {}
    for key, upgrader in upgrade.items():
        if isinstance(key, bool) or not isinstance(key, int) or not 1 <= key < version:
            raise JobValidationError(
                f"@job(upgrade=) of {name!r} has the key {key!r}: each key is the version an "
                f"upgrader starts from, an int from 1 to {version - 1} (version={version})."
            )
        if not callable(upgrader):
            raise JobValidationError(
                f"@job(upgrade=) of {name!r}: upgrade[{key}] is {upgrader!r}, not a function "
                "(args, kwargs) -> (args, kwargs)."
            )
        checked[key] = upgrader
    if version > 1 and not checked:
        raise JobValidationError(
            f"@job(version={version}) of {name!r} needs upgrade={{{version - 1}: fn}}: a "
            f"function that turns version-{version - 1} arguments (args, kwargs) into version "
            f"{version}'s, so rows already queued can still run."
        )
    if checked:
        gaps = [v for v in range(min(checked), version) if v not in checked]
        if gaps:
            raise JobValidationError(
                f"@job(upgrade=) of {name!r} has no upgrader from version {gaps[0]}: a row of "
                f"version {min(checked)} could not reach version {version}. Add "
                f"upgrade[{gaps[0]}] (version-{gaps[0]} arguments to version {gaps[0] + 1})."
            )
    return dict(sorted(checked.items()))


def check_aliases(name: str, aliases: Any) -> tuple[str, ...]:
    """``aliases``: the job's former names (dotted paths), never its own."""
    if aliases is None:
        return ()
    if isinstance(aliases, str) or not isinstance(aliases, Iterable):
        raise JobValidationError(
            f"@job(aliases=) of {name!r} takes a list of former names, such as "
            f'["orders.jobs.old_name"], not {aliases!r}.'
        )
    checked: list[str] = []
    for alias in aliases:
        if not isinstance(alias, str) or not alias or len(alias) > 200:
            raise JobValidationError(
                f"@job(aliases=) of {name!r}: {alias!r} is not a job name (a dotted path of "
                "at most 200 characters)."
            )
        if alias == name:
            raise JobValidationError(f"@job(aliases=) of {name!r} lists the job's own name.")
        if alias not in checked:
            checked.append(alias)
    return tuple(checked)


def missing(upgraders: Mapping[int, Upgrader], start: int, end: int) -> int | None:
    """The first version from ``start`` up to ``end`` (excluded) without an upgrader; None."""
    for version in range(start, end):
        if version not in upgraders:
            return version
    return None


def upgrade(
    name: str,
    upgraders: Mapping[int, Upgrader],
    args: list[Any],
    kwargs: dict[str, Any],
    start: int,
    end: int,
) -> tuple[list[Any], dict[str, Any]]:
    """Version-``start`` arguments brought to version ``end`` through each upgrader in turn.

    Each upgrader gets copies (one that edits its input in place leaves the caller's intact)
    and must return ``(args, kwargs)``: a list or tuple and a dict, storable as an enqueue's
    would be. ``UpgradeError`` otherwise, or when an upgrader is missing; what an upgrader
    raises is passed on.
    """
    gap = missing(upgraders, start, end)
    if gap is not None:
        raise UpgradeError(
            f"Job {name!r} has no upgrader from version {gap} (upgrade[{gap}] in its @job): "
            f"its version-{start} arguments cannot reach version {end}, so it was not run. "
            f"Deploy code whose @job(upgrade=) has upgrade[{gap}], then replay it."
        )
    for version in range(start, end):
        returned = upgraders[version](list(args), dict(kwargs))
        if (
            not isinstance(returned, tuple | list)
            or len(returned) != 2
            or not isinstance(returned[0], tuple | list)
            or not isinstance(returned[1], dict)
        ):
            raise UpgradeError(
                f"upgrade[{version}] of job {name!r} returned {returned!r}, not "
                "(args, kwargs): a list (or tuple) and a dict."
            )
        args, kwargs = list(returned[0]), dict(returned[1])
    try:  # the success write stores them: refused now, as an enqueue would refuse them
        return json_values.check_payload(args, kwargs)
    except JobValidationError as exc:
        raise UpgradeError(
            f"The upgraded arguments of job {name!r} cannot be stored: {exc}"
        ) from None
