"""Bad input through the django.tasks backend: ``InvalidTask`` naming the problem, no row.

Runs on django.tasks (Django 6.x) and on the django-tasks backport (Django 5.2).
"""

from __future__ import annotations

import re

import pytest

from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job

try:
    from django.tasks.exceptions import InvalidTask
except ImportError:  # Django 5.2: the backport
    pytest.importorskip("django_tasks")
    from django_tasks.exceptions import InvalidTaskError as InvalidTask

from testapp import tasks

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("key", ["b\udcffad", "\ud800"])
def test_a_lone_surrogate_in_a_dedupe_key_is_invalid_task(key: str) -> None:
    # No driver can encode it: it used to fail with UnicodeEncodeError at the INSERT.
    with pytest.raises(InvalidTask, match="dedupe_key contains a lone surrogate"):
        tasks.add.using(dedupe_key=key).enqueue(1, 2)
    assert not Job.objects.exists()


@pytest.mark.parametrize("value", [-0.0, 1e16, 1e308])
def test_floats_that_would_come_back_changed_are_invalid_task(value: float) -> None:
    with pytest.raises(InvalidTask, match=re.escape(f"args[0] contains {value!r}")) as caught:
        tasks.add.enqueue(value, 1)
    assert isinstance(caught.value, JobValidationError)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("task", "args", "kwargs", "problem"),
    [
        (tasks.add, (1,), {}, "missing a required argument: 'b'"),
        (tasks.add, (1, 2, 3), {}, "too many positional arguments"),
        (tasks.add, (1, 2), {"c": 3}, "got an unexpected keyword argument 'c'"),
        (tasks.record, (None, "x"), {}, "too many positional arguments"),  # the context is ours
        (tasks.sleep, (), {}, "missing a required argument: 'seconds'"),
    ],
)
def test_arguments_the_function_cannot_take_are_invalid_task(task, args, kwargs, problem) -> None:
    with pytest.raises(InvalidTask) as caught:
        task.enqueue(*args, **kwargs)
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, JobValidationError)
    assert str(caught.value) == (
        f"Task {task.module_path!r} cannot take these arguments: {problem}."
    )
    assert not Job.objects.exists()
    assert tasks.record.enqueue("x").args == ["x"]  # the context left out, as a worker passes it
