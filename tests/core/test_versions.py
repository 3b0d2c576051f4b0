"""``@job(version=, upgrade=, aliases=)`` are checked when the decorator runs, with errors that
say what to write instead; the upgrade chain itself (``versions.upgrade``)."""

from __future__ import annotations

from typing import Any

import pytest

from django_leasejobs import job
from django_leasejobs.core import registry, versions
from django_leasejobs.errors import JobValidationError


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))


def handler(order: Any) -> None:
    pass


def up(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [*args, len(args)], kwargs


def declare(**options: Any) -> Any:
    return job(name="tests.versioned", **options)(handler)


def test_the_defaults() -> None:
    spec = declare()
    assert (spec.version, spec.upgrade, spec.aliases) == (1, {}, ())


def test_a_complete_chain_is_kept_in_version_order() -> None:
    spec = declare(version=3, upgrade={2: up, 1: up}, aliases=["a.b", "a.b", "c.d"])
    assert list(spec.upgrade) == [1, 2]
    assert spec.aliases == ("a.b", "c.d")


@pytest.mark.parametrize("version", [0, -1, 1.5, "2", True, None])
def test_a_version_is_an_int_of_one_or_more(version: Any) -> None:
    with pytest.raises(JobValidationError, match=r"@job\(version=\) takes an int of 1 or more"):
        declare(version=version)


def test_a_version_above_one_needs_the_upgrader_from_the_one_before() -> None:
    with pytest.raises(JobValidationError, match=r"needs upgrade=\{1: fn\}"):
        declare(version=2)


@pytest.mark.parametrize("key", [0, 2, 3, "1", True])
def test_an_upgrade_key_is_a_version_below_the_jobs(key: Any) -> None:
    with pytest.raises(JobValidationError, match=r"an int from 1 to 1 \(version=2\)"):
        declare(version=2, upgrade={key: up})


def test_an_upgrader_must_be_callable() -> None:
    with pytest.raises(JobValidationError, match=r"upgrade\[1\] is 'up', not a function"):
        declare(version=2, upgrade={1: "up"})


def test_upgrade_is_a_dict() -> None:
    with pytest.raises(JobValidationError, match="takes a dict of version to function"):
        declare(version=2, upgrade=[up])


def test_a_gap_in_the_chain_names_the_missing_upgrader() -> None:
    with pytest.raises(JobValidationError, match=r"no upgrader from version 2.*Add upgrade\[2\]"):
        declare(version=4, upgrade={1: up, 3: up})
    with pytest.raises(JobValidationError, match=r"no upgrader from version 2"):
        declare(version=3, upgrade={1: up})


def test_upgraders_of_drained_versions_may_be_dropped() -> None:
    spec = declare(version=3, upgrade={2: up})
    assert list(spec.upgrade) == [2]


@pytest.mark.parametrize("aliases", ["a.b", [""], [3], ["x" * 201], 5])
def test_aliases_are_a_list_of_names(aliases: Any) -> None:
    with pytest.raises(JobValidationError, match=r"@job\(aliases=\)"):
        declare(aliases=aliases)


def test_an_alias_is_not_the_jobs_own_name() -> None:
    with pytest.raises(JobValidationError, match="lists the job's own name"):
        declare(aliases=["tests.versioned"])


def test_nothing_is_registered_when_an_option_is_refused() -> None:
    with pytest.raises(JobValidationError):
        declare(version=2)
    assert registry.lookup("tests.versioned") is None


def test_the_chain_runs_each_upgrader_in_turn_on_copies() -> None:
    args: list[Any] = ["a"]
    kwargs: dict[str, Any] = {"k": 1}
    result = versions.upgrade("j", {1: up, 2: up, 3: up}, args, kwargs, 2, 4)
    assert result == (["a", 1, 2], {"k": 1})
    assert args == ["a"]


def test_the_chain_refuses_what_cannot_be_stored() -> None:
    def bad(args: list[Any], kwargs: dict[str, Any]) -> Any:
        return [object()], {}

    with pytest.raises(versions.UpgradeError, match="cannot be stored"):
        versions.upgrade("j", {1: bad}, [], {}, 1, 2)
