"""The Django tasks API, used as Django's documentation shows it, against LeaseJobsBackend.

Runs on django.tasks (Django 6.x) and on the django-tasks backport (Django 5.2). Jobs are run
in-process with ``protocol.claim`` + ``execution.run``, as a worker does.
"""

from __future__ import annotations

import datetime as dt
import math

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import protocol
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import attempt_ends, execution
from django_leasejobs.runtime.worker import Worker

from ..conftest import fields, shifted
from ..invariants import wait_for

try:
    from django.tasks import TaskResultStatus, default_task_backend, task_backends
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2: the backport
    pytest.importorskip("django_tasks")
    from django_tasks import TaskResultStatus, default_task_backend, task_backends
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from django_tasks.signals import task_enqueued, task_finished, task_started

from testapp import tasks

from django_leasejobs.tasks.backend import LeaseJobsBackend

pytestmark = pytest.mark.django_db

BACKEND = "django_leasejobs.backends.LeaseJobsBackend"


def run_one(worker: str = "w1") -> Outcome:
    """Claim the next due job and run it in-process, as a worker does."""
    claimed = protocol.claim(worker, batch=1)
    assert len(claimed) == 1, claimed
    return execution.run(claimed[0], worker)


@pytest.fixture
def signals():
    """Record every tasks signal sent while the test runs: (signal name, sender, status)."""
    seen: list[tuple[str, object, str, int]] = []

    def receiver(name):
        def record(sender, task_result, **kwargs):
            seen.append((name, sender, task_result.status, task_result.attempts))

        return record

    receivers = {
        task_enqueued: receiver("enqueued"),
        task_started: receiver("started"),
        task_finished: receiver("finished"),
    }
    for signal, function in receivers.items():
        signal.connect(function, weak=False)
    yield seen
    for signal, function in receivers.items():
        signal.disconnect(function)


class TestBackend:
    def test_the_testproject_uses_this_backend_with_its_features(self) -> None:
        backend = default_task_backend
        assert type(task_backends["default"]) is LeaseJobsBackend
        assert backend.supports_defer
        assert backend.supports_priority
        assert backend.supports_get_result
        assert backend.supports_async_task

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"max_attempts": 0}, "max_attempts"),
            ({"backoff": "fast"}, "backoff"),
            ({"backoff": {"base": 1, "speed": 2}}, "unknown keys"),
            ({"retries": 3}, "unknown keys"),
            ({"timeout": 0}, r"OPTIONS\['timeout'\] must be None or a positive number"),
            ({"timeout": "30"}, "timeout"),
            ({"timeout": math.inf}, "timeout"),
        ],
    )
    def test_bad_options_are_refused_with_a_clear_error(self, options, message) -> None:
        with pytest.raises(ImproperlyConfigured, match=message):
            LeaseJobsBackend("default", {"BACKEND": BACKEND, "OPTIONS": options})

    def test_a_bad_queue_name_in_queues_is_refused(self) -> None:
        with pytest.raises(ImproperlyConfigured, match="QUEUES"):
            LeaseJobsBackend("default", {"BACKEND": BACKEND, "QUEUES": ["no spaces"]})


def test_without_any_tasks_framework_the_error_says_what_to_install(monkeypatch) -> None:
    from django_leasejobs.tasks import framework as tasks_framework

    monkeypatch.setattr(tasks_framework, "installed", lambda: ())
    with pytest.raises(ImproperlyConfigured, match="pip install django-tasks"):
        tasks_framework.get()


class TestEnqueue:
    def test_enqueue_writes_a_ready_job_and_returns_its_result(self, signals) -> None:
        result = tasks.add.enqueue(1, 2)
        assert result.status == TaskResultStatus.READY
        assert not result.is_finished
        assert result.args == [1, 2]
        assert result.kwargs == {}
        assert result.backend == "default"
        assert result.attempts == 0
        assert result.errors == []
        job = Job.objects.get(pk=int(result.id))
        assert (job.name, job.task_backend, job.status) == (
            "testapp.tasks.add",
            "default",
            Status.PENDING,
        )
        assert result.enqueued_at == job.created_at
        assert signals == [("enqueued", LeaseJobsBackend, TaskResultStatus.READY, 0)]
        with pytest.raises(ValueError, match="not finished"):
            _ = result.return_value

    def test_enqueue_is_part_of_the_callers_transaction(self) -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.add.enqueue(1, 2)
            raise RuntimeError("roll back")
        assert not Job.objects.exists()

    def test_aenqueue(self) -> None:
        result = async_to_sync(tasks.add.aenqueue)(2, 3)
        assert Job.objects.get(pk=int(result.id)).args == [2, 3]

    def test_defer_with_run_after(self, make_due) -> None:
        when = timezone.now() + dt.timedelta(hours=1)
        result = tasks.add.using(run_after=when).enqueue(1, 2)
        assert Job.objects.get(pk=int(result.id)).run_at == when
        assert protocol.claim("w1", batch=10) == []
        make_due(int(result.id))
        assert [j.pk for j in protocol.claim("w1", batch=10)] == [int(result.id)]

    def test_priorities_order_the_claims(self, make_due) -> None:
        low = tasks.add.using(priority=-5).enqueue(1, 1)
        plain = tasks.add.enqueue(2, 2)
        decorated = tasks.important.enqueue()
        high = tasks.add.using(priority=50).enqueue(3, 3)
        ids = [int(r.id) for r in (low, plain, decorated, high)]
        make_due(*ids, seconds_ago=10)
        order = [j.pk for j in protocol.claim("w1", batch=10)]
        assert order == [int(high.id), int(decorated.id), int(plain.id), int(low.id)]

    def test_queue_names_are_validated_against_queues(self) -> None:
        with pytest.raises(InvalidTask, match="Queue 'emails' is not valid"):
            tasks.add.using(queue_name="emails")
        settings = {"default": {"BACKEND": BACKEND, "QUEUES": ["default", "emails"]}}
        with override_settings(TASKS=settings):
            result = tasks.add.using(queue_name="emails").enqueue(1, 2)
            assert Job.objects.get(pk=int(result.id)).queue == "emails"
            with pytest.raises(InvalidTask, match="Queue 'other' is not valid"):
                tasks.add.using(queue_name="other")

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            ((object(), 1), "not JSON"),
            ((math.nan, 1), "NaN"),
            (("a\x00b", 1), "NUL"),
        ],
    )
    def test_non_json_arguments_are_refused_and_nothing_is_written(self, args, message) -> None:
        with pytest.raises(InvalidTask, match=message) as caught:
            tasks.add.enqueue(*args)
        assert isinstance(caught.value, JobValidationError)
        assert not Job.objects.exists()

    @pytest.mark.parametrize("priority", [101, -101, 1.5])
    def test_bad_priority_is_refused(self, priority) -> None:
        with pytest.raises(InvalidTask, match="priority"):
            tasks.add.using(priority=priority)

    def test_naive_run_after_is_refused(self) -> None:
        with pytest.raises(InvalidTask, match="aware"):
            tasks.add.using(run_after=dt.datetime(2030, 1, 1))

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"max_attempts": 0}, "max_attempts"),
            ({"dedupe_key": "x" * 201}, "dedupe_key"),
            ({"backoff": "soon"}, "backoff"),
            ({"timeout": -1}, "timeout must be None or a positive number"),
            ({"timeout": math.nan}, "timeout"),
        ],
    )
    def test_bad_leasejobs_options_are_refused(self, options, message) -> None:
        with pytest.raises(InvalidTask, match=message):
            tasks.add.using(**options)

    def test_our_options_through_using(self) -> None:
        result = tasks.add.using(max_attempts=7, dedupe_key="sum-1").enqueue(1, 2)
        again = tasks.add.using(dedupe_key="sum-1").enqueue(1, 2)
        assert again.id == result.id
        job = Job.objects.get(pk=int(result.id))
        assert (job.max_attempts, job.dedupe_key) == (7, "sum-1")
        assert Job.objects.count() == 1

    def test_backend_options_give_defaults(self, settings) -> None:
        settings.TASKS = {"default": {"BACKEND": BACKEND, "OPTIONS": {"max_attempts": 2}}}
        result = tasks.add.enqueue(1, 2)
        assert Job.objects.get(pk=int(result.id)).max_attempts == 2
        result = tasks.flaky.enqueue()  # the task's own max_attempts wins
        assert Job.objects.get(pk=int(result.id)).max_attempts == 5


class TestTimeouts:
    def test_the_tasks_own_then_the_options_then_the_setting(self, settings) -> None:
        backend = default_task_backend
        assert backend.task_timeout(tasks.add) is None
        settings.LEASEJOBS_TIMEOUT_SECONDS = 60
        assert backend.task_timeout(tasks.add) == 60.0
        assert backend.task_timeout(tasks.add.using(timeout=5)) == 5.0
        options = LeaseJobsBackend("default", {"BACKEND": BACKEND, "OPTIONS": {"timeout": 7}})
        assert options.task_timeout(tasks.add) == 7.0
        assert options.task_timeout(tasks.sleeps_past_timeout) == 0.3

    @pytest.mark.django_db(transaction=True)  # the worker's threads use their own connections
    def test_a_task_past_its_timeout_fails_as_timeout_on_the_worker(self) -> None:
        result = tasks.sleeps_past_timeout.enqueue()
        summary = Worker(concurrency=1, lease=5, heartbeat=0.1, poll=0.05).run(burst=True)
        assert (summary.dead, summary.timed_out) == (1, 1)
        job = Job.objects.get(pk=int(result.id))
        assert [e["kind"] for e in job.errors] == ["timeout"]
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result.errors[0].exception_class is TimeoutError
        wait_for(lambda: Hit.objects.filter(label="late").exists(), what="the handler")


class TestResults:
    def test_get_result_through_ready_running_successful(self) -> None:
        result = tasks.add.enqueue(1, 2)
        protocol.claim("w1", batch=1)
        running = default_task_backend.get_result(result.id)
        assert running.status == TaskResultStatus.RUNNING
        assert running.worker_ids == ["w1"]
        assert running.started_at is not None
        assert running.last_attempted_at == running.started_at
        assert result.status == TaskResultStatus.READY  # a result is a snapshot ...
        result.refresh()  # ... until refreshed
        assert result.status == TaskResultStatus.RUNNING
        job = Job.objects.get(pk=int(result.id))
        assert execution.run(job, "w1") == Outcome.SUCCEEDED
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.is_finished
        assert result.return_value == 3
        assert result.worker_ids == ["w1"]
        assert result.attempts == 1
        assert result.finished_at is not None
        assert tasks.add.get_result(result.id).return_value == 3
        row = Job.objects.get(pk=int(result.id))
        assert (row.lease_owner, row.finished_by) == ("", "w1")  # no lease; who finished it

    def test_a_task_that_fails_twice_then_succeeds(self, make_due, signals) -> None:
        result = tasks.flaky.enqueue(succeed_on=3)
        job_id = int(result.id)
        assert run_one("w1") == Outcome.RETRIED
        result.refresh()
        assert result.status == TaskResultStatus.READY  # failed, waiting for its retry
        assert [e.exception_class for e in result.errors] == [RuntimeError]
        make_due(job_id)
        assert run_one("w2") == Outcome.RETRIED
        make_due(job_id)
        assert run_one("w3") == Outcome.SUCCEEDED
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.return_value == "ok on attempt 3"
        assert result.worker_ids == ["w1", "w2", "w3"]
        assert result.attempts == 3
        assert len(result.errors) == 2
        assert "flaky failure on attempt 2" in result.errors[1].traceback
        assert [s[0] for s in signals] == ["enqueued", "started", "started", "started", "finished"]
        assert [s[3] for s in signals if s[0] == "started"] == [1, 2, 3]
        assert signals[-1] == ("finished", LeaseJobsBackend, TaskResultStatus.SUCCESSFUL, 3)

    def test_a_task_that_always_fails_is_dead_lettered_and_failed(self, make_due, signals):
        result = tasks.always_fails.enqueue()
        job_id = int(result.id)
        outcomes = []
        for worker in ("w1", "w2", "w3"):
            make_due(job_id)
            outcomes.append(run_one(worker))
        assert outcomes == [Outcome.RETRIED, Outcome.RETRIED, Outcome.DEAD]
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result.is_finished
        assert result.attempts == 3
        assert [e.exception_class for e in result.errors] == [ValueError] * 3
        assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"] * 3
        for attempt, error in enumerate(result.errors, start=1):
            assert f"boom on attempt {attempt}" in error.traceback
            assert "Traceback" in error.traceback
        with pytest.raises(ValueError, match="Task failed"):
            _ = result.return_value
        dead_letter = DeadLetter.objects.get(job_id=job_id)
        assert dead_letter.reason == "attempts exhausted"
        assert len(dead_letter.errors) == 3
        finished = [s for s in signals if s[0] == "finished"]
        assert finished == [("finished", LeaseJobsBackend, TaskResultStatus.FAILED, 3)]
        assert [s[0] for s in signals].count("started") == 3

    def test_a_cancelled_task_is_failed(self) -> None:
        result = tasks.add.enqueue(1, 2)
        assert protocol.cancel(int(result.id))
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result.errors == []

    def test_an_expired_lease_shows_as_an_error_and_the_task_is_ready_again(
        self, expire_lease
    ) -> None:
        result = tasks.add.enqueue(1, 2)
        protocol.claim("w1", batch=1)
        expire_lease(int(result.id))
        assert protocol.recover_expired() == {int(result.id): Outcome.RETRIED}
        result.refresh()
        assert result.status == TaskResultStatus.READY
        assert result.worker_ids == ["w1"]
        assert result.errors[0].exception_class_path == "django_leasejobs.errors.LeaseExpiredError"
        assert "Lease expired" in result.errors[0].traceback

    def test_a_task_dead_lettered_by_lease_recovery_sends_task_finished(
        self, expire_lease, make_due, signals
    ) -> None:
        result = tasks.add.using(max_attempts=1).enqueue(1, 2)
        native = jobs.noop.enqueue(max_attempts=1)
        protocol.claim("w1", batch=2)
        expire_lease(int(result.id), native)
        outcomes = protocol.recover_expired()
        assert outcomes == {int(result.id): Outcome.DEAD, native.pk: Outcome.DEAD}
        attempt_ends.recovered(outcomes)
        assert signals[-1] == ("finished", LeaseJobsBackend, TaskResultStatus.FAILED, 1)
        assert [s[0] for s in signals] == ["enqueued", "finished"]

    @pytest.mark.parametrize("bad_id", ["999999999", "abc", "", "1.5"])
    def test_unknown_ids_raise_task_result_does_not_exist(self, bad_id) -> None:
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(bad_id)

    def test_a_native_job_is_not_a_task_result(self) -> None:
        job = jobs.noop.enqueue()
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(str(job.pk))

    def test_a_row_whose_path_is_not_a_task_has_no_result(self) -> None:
        job = protocol.enqueue_task("testapp.tasks.plain_function", [], {}, task_backend="default")
        with pytest.raises(TaskResultDoesNotExist, match=r"not a django\.tasks Task"):
            default_task_backend.get_result(str(job.pk))

    def test_another_backends_result_is_not_found(self) -> None:
        result = tasks.add.enqueue(1, 2)
        other = LeaseJobsBackend("other", {"BACKEND": BACKEND})
        with pytest.raises(TaskResultDoesNotExist, match="'other'"):
            other.get_result(result.id)

    def test_another_tasks_result_is_a_mismatch(self) -> None:
        result = tasks.add.enqueue(1, 2)
        with pytest.raises(TaskResultMismatch):
            tasks.important.get_result(result.id)

    def test_aget_result_and_arefresh(self) -> None:
        result = tasks.add.enqueue(1, 2)
        fetched = async_to_sync(tasks.add.aget_result)(result.id)
        assert fetched.status == TaskResultStatus.READY
        run_one()
        async_to_sync(result.arefresh)()
        assert result.return_value == 3

    def test_replaying_a_dead_task_makes_a_new_task_result(self, make_due) -> None:
        result = tasks.always_fails.enqueue()
        for _ in range(3):
            make_due(int(result.id))
            run_one()
        new = protocol.replay(DeadLetter.objects.get(job_id=int(result.id)).pk)
        assert new.task_backend == "default"
        replayed = tasks.always_fails.get_result(str(new.pk))
        assert replayed.status == TaskResultStatus.READY
        assert replayed.attempts == 0

    def test_a_long_history_gives_the_errors_it_kept_and_no_count(self, make_due) -> None:
        """30 failures keep the first 3 and the last 20; the count between is no ``TaskError``."""
        result = tasks.always_fails.using(max_attempts=30).enqueue()
        for _ in range(30):
            make_due(int(result.id))
            run_one()
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        kept = [1, 2, 3, *range(11, 31)]
        assert [e.exception_class for e in result.errors] == [ValueError] * len(kept)
        for attempt, error in zip(kept, result.errors, strict=True):
            assert f"boom on attempt {attempt}" in error.traceback
        assert result.worker_ids == ["w1"] * 3 + [""] * 7 + ["w1"] * 20


class TestRetries:
    def test_the_tasks_own_backoff_sets_the_retry(self) -> None:
        result = tasks.flaky.enqueue(succeed_on=2)  # Backoff(base=0): the retry is due at once
        assert run_one("w1") == Outcome.RETRIED
        # The settings' backoff (base 2, equal jitter) would wait 1 to 2 seconds.
        assert Job.objects.filter(pk=int(result.id), run_at__lt=shifted(0.5)).exists()

    def test_the_backend_options_backoff_applies_to_tasks_without_one(self, settings) -> None:
        settings.TASKS = {
            "default": {
                "BACKEND": BACKEND,
                "OPTIONS": {"backoff": {"base": 1000, "cap": 1000, "jitter": "none"}},
            }
        }
        result = tasks.add.enqueue("a", 1)  # "a" + 1 raises TypeError
        assert run_one() == Outcome.RETRIED
        job = Job.objects.filter(pk=int(result.id))
        assert job.filter(run_at__gt=shifted(990), run_at__lt=shifted(1010)).exists()
        result.refresh()
        assert result.errors[0].exception_class is TypeError


class TestRunning:
    def test_context_attempt_is_our_attempt(self, expire_lease, make_due) -> None:
        result = tasks.record.enqueue(label="ctx")
        job_id = int(result.id)
        protocol.claim("w1", batch=1)
        expire_lease(job_id)
        protocol.recover_expired()  # the first attempt's worker died
        make_due(job_id)
        assert run_one("w2") == Outcome.SUCCEEDED
        assert list(Hit.objects.values_list("job_id", "attempt", "label")) == [(job_id, 2, "ctx")]
        result.refresh()
        assert result.return_value == 2
        assert result.worker_ids == ["w1", "w2"]

    def test_async_tasks_run(self) -> None:
        first = tasks.async_add.enqueue(2, 5)
        second = tasks.async_record.enqueue("a")
        assert run_one() == Outcome.SUCCEEDED
        assert run_one() == Outcome.SUCCEEDED
        first.refresh()
        second.refresh()
        assert (first.return_value, second.return_value) == (7, 1)

    def test_an_unstorable_return_value_is_dead_lettered(self) -> None:
        result = tasks.returns_object.enqueue()
        assert run_one() == Outcome.DEAD
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert "Unstorable return value" in result.errors[0].traceback

    @pytest.mark.parametrize(
        "path",
        ["testapp.tasks.plain_function", "testapp.tasks.NOT_A_TASK", "os.system", "no.such.mod"],
    )
    def test_a_marked_row_that_is_not_a_task_is_refused_and_never_called(self, path) -> None:
        job = protocol.enqueue_task(
            path, ["echo hi"] if path == "os.system" else [], {}, task_backend="default"
        )
        assert run_one() == Outcome.DEAD
        row = Job.objects.get(pk=job.pk)
        assert row.status == Status.DEAD
        assert DeadLetter.objects.get(job=job).reason == "not a task"
        assert path in row.last_error
        assert not Hit.objects.exists()

    def test_a_task_path_without_the_marker_is_never_imported(self) -> None:
        job = Job.objects.create(name="testapp.tasks.add", args=[1, 2])
        assert run_one() == Outcome.RELEASED  # waits for a worker that registers the name
        assert fields(job.pk, "status", "deferrals") == {"status": "pending", "deferrals": 1}
        assert not DeadLetter.objects.exists()
        assert not Hit.objects.exists()

    def test_a_task_this_worker_cannot_import_waits_then_dies_after_the_grace(
        self, settings
    ) -> None:
        settings.LEASEJOBS_UNKNOWN_JOB_GRACE = "1h"
        job = protocol.enqueue_task("testapp.gone.task", [], {}, task_backend="default")
        assert run_one() == Outcome.RELEASED  # perhaps a newer release's task
        assert fields(job.pk, "status", "deferrals") == {"status": "pending", "deferrals": 1}
        Job.objects.filter(pk=job.pk).update(run_at=shifted(-1), first_deferred_at=shifted(-3601))
        assert run_one() == Outcome.DEAD
        letter = DeadLetter.objects.get(job=job)
        assert letter.reason == "not a task"  # as such letters always were
        assert "cannot be imported" in letter.errors[-1]["error"]
        assert "LEASEJOBS_UNKNOWN_JOB_GRACE (1:00:00)" in letter.errors[-1]["error"]

    def test_a_receivers_error_does_not_stop_the_task(self, caplog) -> None:
        def broken(sender, task_result, **kwargs):
            raise RuntimeError("receiver bug")

        task_started.connect(broken, weak=False)
        try:
            result = tasks.add.enqueue(1, 2)
            assert run_one() == Outcome.SUCCEEDED
        finally:
            task_started.disconnect(broken)
        result.refresh()
        assert result.return_value == 3
        assert "task.signal_error" in caplog.text
