"""Bad limit options fail when the function is decorated; bad keys fail at enqueue."""

from __future__ import annotations

import re
from typing import Any

import pytest
from testapp import jobs

from django_leasejobs import job
from django_leasejobs.core.limits import Rate, parse_rate
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job


def handler(customer_id: int, region: str = "eu") -> None:
    """A module-level function to decorate (``job`` is applied without registering twice)."""


def handler_with_context(ctx: Any, customer_id: int) -> None:
    """A job that takes the running attempt's context first (``takes_context=True``)."""


def decorate(func: Any = handler, **options: Any) -> Any:
    from django_leasejobs.jobs import JobFunction

    return JobFunction(func, name=f"tests.limits.{func.__name__}", **options)


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("100/m", Rate(100, 60)),
        ("5/s", Rate(5, 1)),
        ("2/h", Rate(2, 3600)),
        (" 10 / 5m ", Rate(10, 300)),
    ],
)
def test_rate_strings(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["", "100", "100/d", "0/m", "-1/m", "1.5/m", "m/100", "10/0m"])
def test_bad_rate_strings_are_refused_at_decoration(text: str) -> None:
    with pytest.raises(JobValidationError, match="rate_limit"):
        decorate(rate_limit=text)


def test_a_rate_that_is_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="rate_limit must be a string"):
        decorate(rate_limit=100)


@pytest.mark.parametrize("limit", [0, -3])
def test_non_positive_limits_are_refused(limit: int) -> None:
    with pytest.raises(JobValidationError, match="concurrency_limit must be at least 1"):
        decorate(concurrency_limit=limit)


@pytest.mark.parametrize("limit", [True, 2.0, "2"])
def test_limits_that_are_not_ints_are_type_errors(limit: Any) -> None:
    with pytest.raises(TypeError, match="concurrency_limit must be a positive int"):
        decorate(concurrency_limit=limit)


def test_template_naming_an_unknown_argument_is_refused() -> None:
    with pytest.raises(JobValidationError, match=r"names 'customer'.*customer_id, region"):
        decorate(concurrency_key="customer:{customer}", concurrency_limit=1)
    with pytest.raises(JobValidationError, match="rate_key"):
        decorate(rate_limit="1/s", rate_key="{nope}")


@pytest.mark.parametrize("template", ["{}", "{0}", "{customer_id", "x}"])
def test_templates_must_name_arguments(template: str) -> None:
    with pytest.raises(JobValidationError, match="concurrency_key"):
        decorate(concurrency_key=template, concurrency_limit=1)


def test_a_key_needs_its_limit() -> None:
    with pytest.raises(JobValidationError, match="concurrency_key needs concurrency_limit"):
        decorate(concurrency_key="c:{customer_id}")
    with pytest.raises(JobValidationError, match="rate_key needs rate_limit"):
        decorate(rate_key="c:{customer_id}")


def test_a_key_is_a_template_or_a_callable() -> None:
    with pytest.raises(TypeError, match="concurrency_key must be a template string or a callable"):
        decorate(concurrency_key=42, concurrency_limit=1)


def test_the_decorator_refuses_through_the_public_face() -> None:
    with pytest.raises(JobValidationError, match="rate_limit"):
        job(rate_limit="fast")(handler)


def test_a_context_job_is_keyed_by_its_callers_arguments() -> None:
    """The context a worker passes first is no argument of an enqueue: a key template names,
    and a key binds, the caller's arguments only."""
    spec = decorate(
        handler_with_context,
        takes_context=True,
        concurrency_key="c:{customer_id}",
        concurrency_limit=1,
        rate_limit="1/s",
        rate_key="r:{customer_id}",
    )
    assert spec.limits.values((5,), {})["concurrency_key"] == "c:5"
    assert spec.limits.values((), {"customer_id": 6})["rate_key"] == "r:6"
    with pytest.raises(JobValidationError, match=r"names 'ctx'.*its arguments: customer_id\)"):
        decorate(
            handler_with_context, takes_context=True, concurrency_key="{ctx}", concurrency_limit=1
        )


def test_templates_use_defaults_and_attributes() -> None:
    spec = decorate(concurrency_key="{region}:{customer_id}", concurrency_limit=1)
    assert spec.limits.values((7,), {})["concurrency_key"] == "eu:7"
    assert spec.limits.values((), {"customer_id": 8, "region": "us"})["concurrency_key"] == "us:8"


@pytest.mark.django_db
def test_keys_that_cannot_be_computed_refuse_the_enqueue() -> None:
    # Arguments the handler cannot take are refused before any key is made.
    with pytest.raises(JobValidationError, match="cannot take these arguments"):
        jobs.per_customer.enqueue()  # no customer_id
    with pytest.raises(JobValidationError, match=r"item 0: .*cannot take these arguments"):
        jobs.per_customer.enqueue_many([((), {})])
    with pytest.raises(JobValidationError, match="arguments do not fit"):
        jobs.per_customer.limits.values((), {})
    with pytest.raises(JobValidationError, match="concurrency_key raised"):
        jobs.per_tenant.limits.values((), {})  # the callable needs the tenant
    with pytest.raises(JobValidationError, match="longer than 200"):
        jobs.per_tenant.enqueue("x" * 300)
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_callable_key_must_give_a_string() -> None:
    spec = decorate(concurrency_key=lambda customer_id, **_: customer_id, concurrency_limit=1)
    with pytest.raises(JobValidationError, match="non-empty string, not 5"):
        spec.limits.values((5,), {})


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("items", "n", "option", "template"),
    [
        ([], 0, "concurrency_key", "first:{items[0]}"),
        ({"a": 1}, 0, "concurrency_key", "first:{items[0]}"),
        (5, 0, "concurrency_key", "first:{items[0]}"),
        (None, 0, "concurrency_key", "first:{items[0]}"),
        ([1], "x", "rate_key", "n:{n:d}"),
        ([1], 1.5, "rate_key", "n:{n:d}"),
        ([1], None, "rate_key", "n:{n:d}"),
        ([1], [2], "rate_key", "n:{n:d}"),
    ],
)
def test_templates_the_arguments_cannot_fill_refuse_the_enqueue(
    items: Any, n: Any, option: str, template: str
) -> None:
    expected = rf"^{option} '{re.escape(template)}' cannot be filled: "
    with pytest.raises(JobValidationError, match=expected):
        jobs.keyed_by_shape.enqueue(items, n=n)
    with pytest.raises(JobValidationError, match=expected):
        jobs.keyed_by_shape.enqueue_many([((items,), {"n": n})])
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_templates_the_arguments_fill_store_their_keys() -> None:
    job_row = jobs.keyed_by_shape.enqueue([7, 8], n=3)
    assert (job_row.concurrency_key, job_row.rate_key) == ("first:7", "n:3")
