"""Django's tasks contract, kept as Django's own backends keep it, with ``max_attempts: 1``.

In-process (``protocol.claim`` + ``execution.run``, or the in-process ``Worker``); the same
assertions through real ``runjobworker`` processes are in ``acceptance/test_tasks_upstream.py``.
Each test names the Django 6.1 test (``tests/tasks/``) it mirrors, where there is one.
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from asgiref.sync import async_to_sync
from testapp import jobs, upstream_tasks

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import execution
from django_leasejobs.runtime.worker import Worker

try:
    from django.tasks import TaskResultStatus, task, task_backends
except ImportError:  # Django 5.2: the backport
    pytest.importorskip("django_tasks")
    from django_tasks import TaskResultStatus, task, task_backends

from django_leasejobs.tasks.backend import LeaseJobsBackend, LeaseTask

pytestmark = pytest.mark.django_db

FAST = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05, "scheduler": False}


def run_one(worker: str = "w1") -> Outcome:
    claimed = protocol.claim(worker, batch=1)
    assert len(claimed) == 1, claimed
    return execution.run(claimed[0], worker)


class TestBackendAndTaskClass:
    def test_using_correct_backend(self) -> None:
        """Mirrors test_custom_backend.CustomBackendTestCase.test_using_correct_backend."""
        backend = task_backends["one_attempt"]
        assert isinstance(backend, LeaseJobsBackend)
        assert backend.alias == "one_attempt"
        assert backend.options == {"max_attempts": 1}
        assert upstream_tasks.noop_task.get_backend() is backend

    def test_custom_task_with_standard_and_custom_values(self) -> None:
        """Mirrors test_custom_backend.CustomTaskTestCase
        .test_custom_task_with_standard_and_custom_values (our task class's options)."""
        my_task = task(priority=10, queue_name="default", max_attempts=2)(
            upstream_tasks.noop_task.func
        )
        assert isinstance(my_task, LeaseTask)
        assert (my_task.priority, my_task.queue_name, my_task.max_attempts) == (10, "default", 2)
        assert my_task.takes_context is False
        assert my_task.run_after is None

    def test_custom_task_invalid_kwarg(self) -> None:
        """Mirrors test_custom_backend.CustomTaskTestCase.test_custom_task_invalid_kwarg."""
        with pytest.raises(TypeError):
            task(unknown_param=123)(upstream_tasks.noop_task.func)


class TestEnqueueArguments:
    def test_enqueue_with_invalid_argument(self) -> None:
        """Mirrors test_tasks.TaskTestCase.test_enqueue_with_invalid_argument."""
        with pytest.raises(TypeError, match="Unsupported type"):
            upstream_tasks.noop_task.enqueue(dt.datetime.now())
        assert not Job.objects.exists()

    def test_aenqueue_with_invalid_argument(self) -> None:
        """Mirrors test_tasks.TaskTestCase.test_aenqueue_with_invalid_argument."""
        with pytest.raises(TypeError, match="Unsupported type"):
            async_to_sync(upstream_tasks.noop_task.aenqueue)(two=dt.datetime.now())
        assert not Job.objects.exists()

    def test_arguments_are_stored_as_django_normalises_them(self) -> None:
        """Tuples become lists, as ``TaskResult.args`` does on Django's backends."""
        result = upstream_tasks.noop_task.enqueue((1, 2), key={"a": (3,)})
        assert result.args == [[1, 2]]
        assert Job.objects.get(pk=int(result.id)).kwargs == {"key": {"a": [3]}}


class TestHandlerExceptions:
    def test_a_task_raising_system_exit_ends_its_attempt_with_the_error(self) -> None:
        """Mirrors test_immediate_backend.test_catches_exception (its SystemExit case)."""
        result = upstream_tasks.failing_task_system_exit.enqueue()
        assert run_one() == Outcome.DEAD
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result.attempts == 1
        assert result.errors[0].exception_class is SystemExit
        assert result.errors[0].traceback.endswith(
            "SystemExit: This Task failed due to SystemExit\n"
        )

    @pytest.mark.django_db(transaction=True)  # the worker's threads use their own connections
    def test_a_job_raising_system_exit_on_the_worker_is_failed_at_once(self, caplog) -> None:
        """Before: SystemExit escaped execute, the thread logged it and the job stayed running."""
        native = jobs.exits.enqueue(max_attempts=1)
        task = upstream_tasks.exit_task.enqueue()
        with caplog.at_level(logging.ERROR, logger="django_leasejobs"):
            summary = Worker(concurrency=1, **FAST).run(burst=True)
        assert "worker.thread_error" not in caplog.text
        assert summary.dead == 2
        assert Job.objects.get(pk=native.pk).last_error.startswith("SystemExit: 3")
        assert DeadLetter.objects.filter(job_id=native.pk).exists()
        task.refresh()
        assert task.status == TaskResultStatus.FAILED
        assert task.errors[0].exception_class is SystemExit

    def test_a_keyboard_interrupt_is_let_through_as_django_does(self) -> None:
        """Mirrors test_immediate_backend.test_throws_keyboard_interrupt: not recorded."""
        job = jobs.interrupts.enqueue()
        claimed = protocol.claim("w1", batch=1)
        with pytest.raises(KeyboardInterrupt):
            execution.execute(claimed[0], "w1")
        assert Job.objects.get(pk=job.pk).status == Status.RUNNING

    def test_complex_return_value(self) -> None:
        """Mirrors test_immediate_backend.test_complex_return_value."""
        result = upstream_tasks.complex_return_value.enqueue()
        assert run_one() == Outcome.DEAD
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result._return_value is None
        assert result.errors[0].exception_class is TypeError
        assert "Unsupported type" in result.errors[0].traceback


class TestFinishedSignal:
    def test_failed_task_is_logged_with_its_traceback_by_the_frameworks_logger(
        self, caplog
    ) -> None:
        """Mirrors test_immediate_backend.test_catches_exception's log assertion.

        ``task_finished`` is sent while the exception is handled, so the framework's own
        receiver logs the failure with ``exc_info``.
        """
        result = upstream_tasks.failing_task_value_error.enqueue()
        with caplog.at_level(logging.ERROR, logger=upstream_tasks._FRAMEWORK):
            assert run_one() == Outcome.DEAD
        records = [r for r in caplog.records if r.name == upstream_tasks._FRAMEWORK]
        assert len(records) == 1
        assert f"id={result.id}" in records[0].getMessage()
        assert "state=FAILED" in records[0].getMessage()
        assert records[0].exc_info is not None
        assert records[0].exc_info[0] is ValueError
        assert "This Task failed due to ValueError" in caplog.text

    def test_a_successful_task_is_logged_without_an_exception(self, caplog) -> None:
        """Mirrors test_immediate_backend.test_enqueue_logs (the worker's two lines)."""
        result = upstream_tasks.calculate_meaning_of_life.enqueue()
        with caplog.at_level(logging.DEBUG, logger=upstream_tasks._FRAMEWORK):
            assert run_one() == Outcome.SUCCEEDED
        records = [r for r in caplog.records if r.name == upstream_tasks._FRAMEWORK]
        assert [("state=RUNNING" in r.getMessage(), r.exc_info) for r in records] == [
            (True, None),
            (False, None),
        ]
        assert all(result.id in r.getMessage() for r in records)
        assert "None" not in records[-1].getMessage()
