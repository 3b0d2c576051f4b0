"""Django 6.1's own tasks tests (``tests/tasks/``), mirrored through a real ``runjobworker``.

Django's ``ImmediateBackend`` runs a task inside ``enqueue()``; here ``enqueue()`` writes a job
and a ``runjobworker --burst`` process runs it, then the test refreshes the result and makes
the upstream test's assertions. The tasks use the ``one_attempt`` backend
(``OPTIONS={"max_attempts": 1}``), so a failure is final at once, as on Django's backends.
Each test names the upstream test it mirrors; docs/django-tasks.md lists those that cannot apply.
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from testapp import upstream_tasks as test_tasks

from .conftest import FAST, WorkerProcess

try:
    from django.tasks import TaskResultStatus
except ImportError:  # Django 5.2: the backport
    from django_tasks import TaskResultStatus

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def run_worker(spawn: Any) -> WorkerProcess:
    """One ``runjobworker --burst``: it runs every due task, then exits."""
    worker = spawn("--burst", "--concurrency", "2", *FAST, name="upstream")
    assert worker.wait() == 0, worker.log()
    return worker


def lines_about(worker: WorkerProcess, result: Any) -> list[str]:
    """The framework logger's lines about ``result`` in the worker's log."""
    return [line for line in worker.log().splitlines() if f"Task id={result.id} " in line]


def assert_finished_times(result: Any) -> None:
    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at


def test_enqueue_task(spawn) -> None:
    """Mirrors test_immediate_backend.ImmediateBackendTestCase.test_enqueue_task (and the
    ``_async`` variant, which enqueues with ``aenqueue``)."""
    tasks = [test_tasks.noop_task, test_tasks.noop_task_async]
    results = [task.enqueue(1, two=3) for task in tasks]
    awaited = [async_to_sync(task.aenqueue)() for task in tasks]
    worker = run_worker(spawn)
    for task, result in [*zip(tasks, results, strict=True), *zip(tasks, awaited, strict=True)]:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.is_finished is True
        assert_finished_times(result)
        assert result.return_value is None
        assert result.task == task
        assert result.attempts == 1
        assert result.worker_ids == [worker.worker_id]
    assert [(r.args, r.kwargs) for r in results] == [([1], {"two": 3})] * 2
    assert [(r.args, r.kwargs) for r in awaited] == [([], {})] * 2


@pytest.mark.parametrize(
    ("task", "exception", "message"),
    [
        (test_tasks.failing_task_value_error, ValueError, "This Task failed due to ValueError"),
        (test_tasks.failing_task_system_exit, SystemExit, "This Task failed due to SystemExit"),
        (test_tasks.exit_task, SystemExit, "1"),
    ],
    ids=["ValueError", "SystemExit", "exit"],
)
def test_catches_exception(spawn, task, exception, message) -> None:
    """Mirrors test_immediate_backend.ImmediateBackendTestCase.test_catches_exception (and
    test_failed_logs): the attempt ends at once, the error and its traceback are recorded, and
    the framework's logger writes one ERROR line with the traceback."""
    result = task.enqueue()
    worker = run_worker(spawn)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert result.is_finished is True
    assert_finished_times(result)
    assert result.errors[0].exception_class is exception
    assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n")
    assert result.task == task
    assert (result.args, result.kwargs) == ([], {})
    assert result.attempts == 1
    lines = lines_about(worker, result)
    assert [("state=RUNNING" in line, "state=FAILED" in line) for line in lines] == [
        (True, False),
        (False, True),
    ]
    log = worker.log()
    after = log[log.index(lines[-1]) :]
    assert "Traceback (most recent call last)" in after
    assert f"{exception.__name__}: {message}" in after
    assert "worker.thread_error" not in log


def test_complex_exception(spawn) -> None:
    """Mirrors test_immediate_backend.ImmediateBackendTestCase.test_complex_exception."""
    result = test_tasks.complex_exception.enqueue()
    worker = run_worker(spawn)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert_finished_times(result)
    assert result._return_value is None
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback
    assert result.task == test_tasks.complex_exception
    assert "state=FAILED" in lines_about(worker, result)[-1]


def test_complex_return_value(spawn) -> None:
    """Mirrors test_immediate_backend.ImmediateBackendTestCase.test_complex_return_value."""
    result = test_tasks.complex_return_value.enqueue()
    worker = run_worker(spawn)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert_finished_times(result)
    assert result._return_value is None
    assert result.errors[0].exception_class is TypeError
    assert "Unsupported type" in result.errors[0].traceback
    assert "state=FAILED" in lines_about(worker, result)[-1]


def test_result_takes_context_and_context(spawn) -> None:
    """Mirrors test_immediate_backend.ImmediateBackendTestCase.test_result, test_takes_context,
    test_context, test_enqueue_logs and test_successful_task_no_none_in_logs."""
    meaning = test_tasks.calculate_meaning_of_life.enqueue()
    task_id = test_tasks.get_task_id.enqueue()
    context = test_tasks.context_attempt.enqueue(1)
    worker = run_worker(spawn)
    for result in (meaning, task_id, context):
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        lines = lines_about(worker, result)
        assert ["state=RUNNING" in lines[0], "state=SUCCESSFUL" in lines[1]] == [True, True]
        assert not any("None" in line for line in lines)
    assert meaning.return_value == 42
    assert task_id.return_value == task_id.id


def test_get_result_refresh_result_and_pickle_task_result(spawn) -> None:
    """Mirrors test_tasks.TaskTestCase.test_get_result, test_refresh_result and
    test_pickle_task_result, on a task a worker has run."""
    result = test_tasks.calculate_meaning_of_life.enqueue()
    run_worker(spawn)
    result.refresh()
    fetched = test_tasks.calculate_meaning_of_life.get_result(result.id)
    assert fetched == result
    assert async_to_sync(test_tasks.calculate_meaning_of_life.aget_result)(result.id) == result
    original = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == original
    async_to_sync(result.arefresh)()
    assert dataclasses.asdict(result) == original
    if hasattr(type(result.task), "_reconstruct"):  # Django 6.1 pickles a Task by its path
        assert pickle.loads(pickle.dumps(result)) == result
