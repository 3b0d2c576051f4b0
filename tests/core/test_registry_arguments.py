"""Arguments that do not fit the handler's signature are refused at enqueue, not at run time."""

from __future__ import annotations

import inspect
import itertools
from typing import Any

import pytest
from testapp import jobs

from django_leasejobs import JobValidationError, protocol
from django_leasejobs.core.registry import ArgumentCheck
from django_leasejobs.errors import JobArgumentsError
from django_leasejobs.models import DeadLetter, Job, Schedule
from django_leasejobs.protocol.base import Failure


def plain(a, b): ...
def defaults(a, b=1, *, c, d=2): ...
def positional_only(a, /, b=1): ...
def positional_only_and_kwargs(a, /, **kwargs): ...
def star_args(a, *args, b): ...
def star_kwargs(*, a=1, **kwargs): ...
def anything(*args, **kwargs): ...
def nothing(): ...


SIGNATURES = [
    plain,
    defaults,
    positional_only,
    positional_only_and_kwargs,
    star_args,
    star_kwargs,
    anything,
    nothing,
]
ARGS = [(), (1,), (1, 2), (1, 2, 3)]
KWARGS = [{}, {"a": 1}, {"b": 2}, {"c": 3}, {"a": 1, "c": 3}, {"b": 2, "c": 3}, {"z": 9}]


@pytest.mark.parametrize("func", SIGNATURES, ids=lambda f: f.__name__)
def test_the_quick_check_answers_as_bind_does(func: Any) -> None:
    signature = inspect.signature(func)
    check = ArgumentCheck(signature)
    for args, kwargs in itertools.product(ARGS, KWARGS):
        try:
            signature.bind(*args, **kwargs)
            fits = True
        except TypeError:
            fits = False
        assert check(args, kwargs) is fits, (func.__name__, args, kwargs)


pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("args", "kwargs", "problem"),
    [
        ((1,), {}, "missing a required argument: 'b'"),
        ((1, 2, 3), {}, "too many positional arguments"),
        ((1, 2), {"c": 3}, "got an unexpected keyword argument 'c'"),
        ((1,), {"a": 2}, "multiple values for argument 'a'"),
    ],
)
def test_enqueue_refuses_arguments_the_handler_cannot_take(args, kwargs, problem) -> None:
    with pytest.raises(JobArgumentsError) as refused:
        jobs.add.enqueue(*args, **kwargs)
    assert isinstance(refused.value, TypeError)
    assert isinstance(refused.value, JobValidationError)
    assert str(refused.value) == (
        f"Job 'testapp.jobs.add' cannot take these arguments: {problem} (its signature: add(a, b))."
    )
    with pytest.raises(TypeError, match=problem):
        jobs.add.using(priority=1).enqueue(*args, **kwargs)
    assert not Job.objects.exists()


def test_the_context_parameter_is_not_the_callers() -> None:
    assert jobs.record.enqueue("x").args == ["x"]
    assert jobs.record.enqueue(label="y").kwargs == {"label": "y"}
    with pytest.raises(TypeError, match=r"too many positional.*record\(label=''\)"):
        jobs.record.enqueue(None, "x")  # as if passing the context too
    with pytest.raises(TypeError, match="missing a required argument: 'seconds'"):
        jobs.sleep.enqueue()
    assert Job.objects.count() == 2


def test_star_args_and_star_kwargs_take_anything() -> None:
    job = jobs.takes_anything.enqueue(1, 2, 3, x=1, label="y")
    assert (job.args, job.kwargs) == ([1, 2, 3], {"x": 1, "label": "y"})
    assert jobs.takes_anything.enqueue().args == []


def test_enqueue_many_names_the_item_and_writes_nothing() -> None:
    with pytest.raises(TypeError) as refused:
        jobs.add.enqueue_many([((1, 2), {}), ((3, 4), {}), ((5,), {})])
    assert str(refused.value).startswith(
        "enqueue_many item 2: Job 'testapp.jobs.add' cannot take these arguments: missing"
    )
    with pytest.raises(TypeError, match=r"enqueue_many item 1: .*unexpected keyword argument"):
        jobs.add.enqueue_many([{"args": [1, 2]}, {"args": [1, 2], "kwargs": {"x": 1}, "delay": 5}])
    assert not Job.objects.exists()


def dead_letter(make_due: Any, *args: Any) -> DeadLetter:
    job = jobs.add.using(max_attempts=1).enqueue(*args)
    make_due(job)
    (claimed,) = protocol.claim("arguments-test", batch=1)
    protocol.fail(job.pk, claimed.attempt, Failure("boom", "Traceback: boom"))
    return DeadLetter.objects.get(job=job)


def test_a_replay_with_arguments_the_handler_cannot_take_is_refused(make_due) -> None:
    letter = dead_letter(make_due, 1, 2)
    with pytest.raises(JobArgumentsError, match="too many positional arguments"):
        protocol.replay(letter.pk, args=[1, 2, 3])
    letter.refresh_from_db()
    assert letter.replayed_job_id is None
    assert protocol.replay(letter.pk, args=[3], kwargs={"b": 4}).kwargs == {"b": 4}


def test_a_group_replay_refuses_only_the_letters_whose_arguments_do_not_fit(make_due) -> None:
    """A letter stored before the handler's signature changed: refused, the others replayed."""
    fits, unfit = dead_letter(make_due, 1, 2), dead_letter(make_due, 3, 4)
    DeadLetter.objects.filter(pk=unfit.pk).update(args=[3, 4, 5])
    result = protocol.replay_group(fits.fingerprint)
    assert [letter for letter, _ in result.replayed] == [fits.pk]
    assert [letter for letter, _ in result.refused] == [unfit.pk]
    assert "cannot take these arguments: too many positional" in result.refused[0][1]


def test_a_schedule_whose_arguments_do_not_fit_emits_nothing() -> None:
    import datetime as dt

    from django.utils import timezone

    schedule = Schedule.objects.create(name="s", cron="@daily", job="testapp.jobs.add", args=[1])
    assert "cannot take these arguments" in schedule.problems()["args"]
    when = timezone.now() - dt.timedelta(minutes=1)
    with pytest.raises(JobArgumentsError, match="missing a required argument: 'b'"):
        protocol.emit_occurrence(schedule, when, when)
    assert not Job.objects.exists()
