"""The schema guards what the code assumes: documented states only, priorities in range."""

from __future__ import annotations

import itertools

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction

from django_leasejobs.core.validation import MAX_PRIORITY, MIN_PRIORITY
from django_leasejobs.models import Job, Status


def test_status_constraint_lists_exactly_the_documented_states() -> None:
    constraint = next(c for c in Job._meta.constraints if c.name == "leasejobs_job_status_valid")
    ((lookup, values),) = constraint.condition.children  # type: ignore[attr-defined]
    assert lookup == "status__in"
    assert sorted(values) == sorted(Status.values)
    assert sorted(Status.values) == sorted(
        ["pending", "running", "succeeded", "failed", "dead", "cancelled"]
    )


@pytest.mark.parametrize(
    ("index_name", "statuses"),
    [
        ("leasejobs_claimable", {Status.PENDING, Status.FAILED}),
        ("leasejobs_running_lease", {Status.RUNNING}),
        ("leasejobs_finished", {Status.SUCCEEDED, Status.DEAD, Status.CANCELLED}),
        ("leasejobs_limited", {Status.PENDING, Status.FAILED}),
        ("leasejobs_running_key", {Status.RUNNING}),
    ],
)
def test_partial_indexes_cover_the_states_their_queries_read(
    index_name: str, statuses: set[str]
) -> None:
    """A partial index left out of step with the states would silently drop rows from a query."""
    index = next(i for i in Job._meta.indexes if i.name == index_name)
    children = index.condition.children  # type: ignore[union-attr]
    ((lookup, values),) = [c for c in children if isinstance(c, tuple) and "status" in c[0]]
    assert {lookup: set(values) if isinstance(values, list) else {values}} in (
        {"status__in": statuses},
        {"status": statuses},
    )


def test_the_claimable_indexes_split_jobs_by_limits() -> None:
    """Each due job is in exactly one of the two claim indexes, as the claims' filters say."""
    from django_leasejobs.dialects.base.limited import LIMITED, UNLIMITED

    indexes = {i.name: i.condition for i in Job._meta.indexes}
    claimable = indexes["leasejobs_claimable"].children  # type: ignore[union-attr]
    assert all(child in claimable for child in UNLIMITED.children)
    limited = indexes["leasejobs_limited"].children  # type: ignore[union-attr]
    assert LIMITED in limited


def test_every_state_has_a_docstring_saying_who_moves_jobs_out() -> None:
    import ast
    import inspect

    from django_leasejobs import models

    tree = ast.parse(inspect.getsource(models.Status))
    body = tree.body[0].body  # type: ignore[attr-defined]
    documented = {
        node.targets[0].id
        for node, after in itertools.pairwise(body)
        if isinstance(node, ast.Assign)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
    }
    assert documented == {member.name for member in Status}


@pytest.mark.django_db
def test_database_refuses_an_undocumented_status() -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(name="x", status="lost")


@pytest.mark.django_db
@pytest.mark.parametrize("priority", [MIN_PRIORITY - 1, MAX_PRIORITY + 1])
def test_database_refuses_priority_out_of_range(priority: int) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(name="x", priority=priority)


@pytest.mark.django_db
def test_migrations_match_models() -> None:
    call_command("makemigrations", "django_leasejobs", "--check", "--dry-run", verbosity=0)
