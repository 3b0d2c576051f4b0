"""``fn.using(**options)``: enqueue options apart from the handler's arguments.

The handlers below are registered by the ``option_jobs`` fixture, which restores the registry
afterwards, so their system check warnings reach no other test.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone
from testapp import jobs

from django_leasejobs import JobValidationError, job
from django_leasejobs.checks.jobs import check_option_parameters
from django_leasejobs.core import registry
from django_leasejobs.core.enqueue_options import OPTION_NAMES, option_parameters
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.jobs import JobFunction
from django_leasejobs.models import Job
from django_leasejobs.protocol import ENQUEUE_OPTIONS

pytestmark = pytest.mark.django_db


def remind(order_id: int, priority: str = "normal", queue: str = "") -> None:
    """A handler with parameters named like enqueue options."""


def positional_priority(priority: int, /) -> None:
    """``priority`` is positional-only here: a keyword of that name can only be the option."""


def anything(*args: Any, **kwargs: Any) -> None:
    """Takes any keyword, so none is ambiguous."""


@pytest.fixture
def option_jobs(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The handlers above registered; monkeypatch puts the registry back afterwards."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))
    return SimpleNamespace(
        remind=job(remind),
        positional_priority=job(positional_priority),
        anything=job(anything),
    )


def test_the_options_are_the_protocols() -> None:
    assert frozenset(ENQUEUE_OPTIONS) == OPTION_NAMES


def test_using_sets_options_and_passes_every_keyword_to_the_handler() -> None:
    configured = jobs.add.using(priority=5, queue="other", max_attempts=2)
    row = Job.objects.get(pk=configured.enqueue(1, b=2).pk)
    assert (row.args, row.kwargs) == ([1], {"b": 2})
    assert (row.priority, row.queue, row.max_attempts) == (5, "other", 2)


def test_using_is_a_copy_of_the_registered_job_not_a_new_one() -> None:
    configured = jobs.add.using(priority=5)
    assert configured is not jobs.add
    assert isinstance(configured, JobFunction)
    assert configured.name == jobs.add.name == "testapp.jobs.add"
    assert registry.get("testapp.jobs.add") is jobs.add
    assert configured(1, 2) == 3  # still callable inline
    assert repr(configured) == "<job testapp.jobs.add using(priority=5)>"
    row = jobs.add.enqueue(1, 2)  # the job itself keeps its defaults
    assert row.priority == 0


def test_using_calls_chain_a_later_option_over_an_earlier_one() -> None:
    base = jobs.add.using(queue="other", priority=1)
    chained = base.using(priority=5)
    row = chained.enqueue(1, 2)
    assert (row.queue, row.priority) == ("other", 5)
    assert base.enqueue(1, 2).priority == 1  # the earlier copy is unchanged
    reset = chained.using(queue=None)  # None: the job's own default again
    assert reset.enqueue(1, 2).queue == "default"


def test_run_at_and_delay_replace_each_other_along_a_chain() -> None:
    when = timezone.now() + dt.timedelta(days=2)
    before = db_now()
    delayed = jobs.add.using(run_at=when).using(delay=60)
    row = delayed.enqueue(1, 2)
    assert before + dt.timedelta(seconds=60) <= row.run_at < when
    assert delayed.using(run_at=when).enqueue(1, 2).run_at == when


def test_delay_is_counted_from_each_enqueue() -> None:
    later = jobs.add.using(delay=dt.timedelta(hours=1))
    first = later.enqueue(1, 2)
    Job.objects.filter(pk=first.pk).update(run_at=first.run_at)  # nothing moves the clock here
    before = db_now()
    second = later.enqueue(3, 4)
    assert second.run_at >= before + dt.timedelta(hours=1)


def test_dedupe_options_through_using() -> None:
    keyed = jobs.add.using(dedupe_key="only-one")
    first, second = keyed.enqueue(1, 2), keyed.enqueue(3, 4)
    assert first.pk == second.pk
    by_arguments = jobs.add.using(dedupe_key=True)
    assert by_arguments.enqueue(5, 6).pk == by_arguments.enqueue(a=5, b=6).pk
    assert Job.objects.count() == 2


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"prio": 5},
            TypeError,
            "unknown option.s. prio; the options are run_at, delay, priority, queue",
        ),
        ({"args": [1]}, TypeError, r"arguments go to \.enqueue\(\): add\.using\(\.\.\.\)"),
        ({"priority": "high"}, JobValidationError, "priority must be an integer"),
        ({"priority": 101}, JobValidationError, "out of range"),
        ({"queue": "a b"}, JobValidationError, "not a valid queue name"),
        ({"max_attempts": 0}, JobValidationError, "max_attempts must be an integer"),
        ({"dedupe_key": ""}, JobValidationError, "dedupe_key must be a non-empty string"),
        ({"dedupe_key": False}, JobValidationError, "dedupe_key must be a non-empty string"),
        ({"delay": -1}, JobValidationError, "non-negative"),
        ({"delay": "soon"}, JobValidationError, "delay must be seconds"),
        ({"run_at": "tomorrow"}, JobValidationError, "run_at must be a datetime"),
        ({"run_at": dt.datetime(2030, 1, 1)}, JobValidationError, "naive datetime"),
        (
            {"run_at": timezone.now(), "delay": 5},
            JobValidationError,
            "Give run_at or delay, not both",
        ),
        ({"dedupe_states": ["pending"]}, JobValidationError, "every live state"),
        ({"dedupe_period": 0}, JobValidationError, "dedupe_period must be between"),
        ({"on_conflict": "merge"}, JobValidationError, "on_conflict must be"),
    ],
)
def test_bad_options_are_refused_by_using(options: dict[str, Any], error: type, message: str):
    with pytest.raises(error, match=message):
        jobs.add.using(**options)
    assert not Job.objects.exists()


def test_a_dedupe_option_without_a_key_is_refused_at_enqueue() -> None:
    """Whether a key is set may change along a chain, so the pair is checked at enqueue."""
    debounced = jobs.add.using(on_conflict="replace")
    with pytest.raises(JobValidationError, match="need a dedupe_key"):
        debounced.enqueue(1, 2)
    assert debounced.using(dedupe_key="k").enqueue(1, 2).dedupe_key == "k"


def test_a_parameter_named_like_an_option_reaches_the_handler_through_using(
    option_jobs: SimpleNamespace,
) -> None:
    row = option_jobs.remind.using().enqueue(5, priority="high", queue="sms")
    assert (row.kwargs, row.priority, row.queue) == (
        {"priority": "high", "queue": "sms"},
        0,
        "default",
    )
    both = option_jobs.remind.using(priority=3).enqueue(5, priority="high")
    assert (both.kwargs, both.priority) == ({"priority": "high"}, 3)


def test_enqueue_with_a_keyword_that_is_both_refuses_and_points_at_using(
    option_jobs: SimpleNamespace,
) -> None:
    with pytest.raises(TypeError) as refused:
        option_jobs.remind.enqueue(5, priority="high")
    assert str(refused.value) == (
        "Job 'tests.core.test_enqueue_options.remind' has a parameter named 'priority', which is "
        "also an enqueue option, so remind.enqueue(..., priority=...) is ambiguous. Set the "
        "option with remind.using(priority=...).enqueue(...); pass the argument with "
        "remind.using().enqueue(..., priority=...)."
    )
    assert not Job.objects.exists()
    # Options the handler has no parameter for are still options.
    row = option_jobs.remind.enqueue(5, delay=60, max_attempts=2)
    assert (row.kwargs, row.max_attempts) == ({}, 2)


def test_positional_only_and_var_keyword_parameters_are_not_ambiguous(
    option_jobs: SimpleNamespace,
) -> None:
    assert option_parameters(option_jobs.positional_priority) == []
    assert option_parameters(option_jobs.anything) == []
    assert option_parameters(option_jobs.remind) == ["priority", "queue"]
    row = option_jobs.positional_priority.enqueue(1, priority=7)
    assert (row.args, row.kwargs, row.priority) == ([1], {}, 7)
    # A handler taking **kwargs: enqueue() keeps reading options; using() passes them on.
    optioned = option_jobs.anything.enqueue(priority=7)
    passed = option_jobs.anything.using().enqueue(priority=7)
    assert (optioned.kwargs, optioned.priority) == ({}, 7)
    assert (passed.kwargs, passed.priority) == ({"priority": 7}, 0)


def test_the_system_check_names_each_job_and_parameter(option_jobs: SimpleNamespace) -> None:
    warnings = check_option_parameters()
    assert [(w.id, w.obj) for w in warnings] == [
        ("leasejobs.W011", remind),
        ("leasejobs.W011", remind),
    ]
    assert "'tests.core.test_enqueue_options.remind' has a parameter named 'priority'" in (
        warnings[0].msg
    )
    assert "'queue'" in warnings[1].msg
    assert "remind.using(priority=...).enqueue(...)" in (warnings[0].hint or "")


def test_the_system_check_is_quiet_for_the_test_project() -> None:
    assert check_option_parameters() == []


def test_enqueue_many_on_a_using_copy_lets_an_item_override_its_options() -> None:
    when = timezone.now() + dt.timedelta(days=1)
    before = db_now()
    made = jobs.add.using(priority=5, delay=60, queue="other").enqueue_many(
        [
            ((1, 2), {}),
            {"args": [3, 4], "priority": 9},
            {"args": [5], "kwargs": {"b": 6}, "run_at": when},
        ]
    )
    rows = [Job.objects.get(pk=job.pk) for job in made]
    assert [(r.args, r.kwargs) for r in rows] == [([1, 2], {}), ([3, 4], {}), ([5], {"b": 6})]
    assert [r.priority for r in rows] == [5, 9, 5]
    assert [r.queue for r in rows] == ["other"] * 3
    assert all(r.run_at >= before + dt.timedelta(seconds=60) for r in rows[:2])
    assert rows[2].run_at == when  # the item's run_at replaces the copy's delay


def test_enqueue_many_on_a_using_copy_refuses_bad_items_whole() -> None:
    configured = jobs.add.using(priority=5)
    with pytest.raises(JobValidationError, match="not int"):
        configured.enqueue_many([((1, 2), {}), 7])
    with pytest.raises(JobValidationError, match="Unknown keys in enqueue_many item"):
        configured.enqueue_many([{"args": [1, 2], "prio": 1}])
    with pytest.raises(TypeError, match=r"item 1: Job 'testapp\.jobs\.add' cannot take"):
        configured.enqueue_many([((1, 2), {}), ((1, 2, 3), {})])
    assert not Job.objects.exists()
