"""Reading results: ``fn.get_result``, ``job.wait`` / ``await_result`` on jobs that finish in the
test's own thread, the replay link, the refusal inside a transaction, and bad input.

Waiting for a worker (a thread, a subprocess) is in tests/models/test_results_wait.py and
tests/acceptance/test_wait_worker.py.
"""

from __future__ import annotations

import datetime as dt
import math

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from testapp import jobs

import django_leasejobs
from django_leasejobs import JobFailedError, protocol
from django_leasejobs.core import notify
from django_leasejobs.errors import LeaseJobsError
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.testing import drain


def _dead(job_function=jobs.permanent) -> Job:
    job = job_function.enqueue()
    drain()
    job.refresh_from_db()
    assert job.status == Status.DEAD
    return job


@pytest.mark.django_db
class TestGetResult:
    def test_returns_the_refreshed_job_with_its_result(self) -> None:
        job = jobs.add.enqueue(2, 3)
        assert jobs.add.get_result(job.pk).status == Status.PENDING
        drain()
        read = jobs.add.get_result(job.pk)
        assert isinstance(read, Job)
        assert (read.pk, read.status, read.result) == (job.pk, Status.SUCCEEDED, 5)
        assert read.replayed_by is None
        assert job.status == Status.PENDING  # the caller's instance is left alone

    def test_aget_result_for_async_code(self) -> None:
        job = jobs.add.enqueue(2, 2)
        drain()
        read = async_to_sync(jobs.add.aget_result)(job.pk)
        assert (read.status, read.result) == (Status.SUCCEEDED, 4)
        with pytest.raises(Job.DoesNotExist):
            async_to_sync(jobs.noop.aget_result)(job.pk)

    def test_takes_an_id_as_a_string_of_digits(self) -> None:
        job = jobs.add.enqueue(1, 1)
        assert jobs.add.get_result(str(job.pk)).pk == job.pk

    def test_an_unknown_id_raises_does_not_exist(self) -> None:
        job = jobs.add.enqueue(1, 1)
        with pytest.raises(Job.DoesNotExist, match=rf"No job {job.pk + 1000} of testapp"):
            jobs.add.get_result(job.pk + 1000)

    def test_an_id_past_every_integer_column_is_unknown_too(self) -> None:
        with pytest.raises(Job.DoesNotExist):
            jobs.add.get_result(10**30)
        with pytest.raises(Job.DoesNotExist):
            jobs.add.get_result(str(10**30))

    def test_another_functions_job_is_not_returned(self) -> None:
        other = jobs.noop.enqueue()
        with pytest.raises(Job.DoesNotExist, match=f"No job {other.pk} of testapp.jobs.add"):
            jobs.add.get_result(other.pk)
        assert jobs.noop.get_result(other.pk).pk == other.pk

    @pytest.mark.parametrize(
        ("bad", "error", "match"),
        [
            (None, TypeError, "not NoneType"),
            (True, TypeError, "not bool"),
            (1.0, TypeError, "not float"),
            ("abc", ValueError, "whole number, not 'abc'"),
            ("-1", ValueError, "whole number"),
            ("", ValueError, "whole number"),
            ("\u00b2", ValueError, "whole number"),
        ],
    )
    def test_bad_ids_are_refused_clearly(self, bad, error, match) -> None:
        with pytest.raises(error, match=match):
            jobs.add.get_result(bad)

    def test_a_dead_job_reports_whether_it_was_replayed_and_by_which_job(self) -> None:
        dead = _dead()
        assert jobs.permanent.get_result(dead.pk).replayed_by is None
        letter = DeadLetter.objects.get(job=dead)
        replay = protocol.replay(letter.pk)
        read = jobs.permanent.get_result(dead.pk)
        assert read.status == Status.DEAD
        assert read.replayed_by == replay
        assert jobs.permanent.get_result(replay.pk).replayed_from == read
        assert jobs.permanent.get_result(replay.pk).replayed_by is None
        assert jobs.add.enqueue(1, 2).replayed_from is None

    def test_reading_the_replay_link_costs_no_query_after_get_result(
        self, django_assert_num_queries
    ) -> None:
        dead = _dead()
        protocol.replay(DeadLetter.objects.get(job=dead).pk)
        with django_assert_num_queries(1):
            read = jobs.permanent.get_result(dead.pk)
            assert read.replayed_by is not None
            assert read.replayed_by.status == Status.PENDING
        plain = jobs.add.enqueue(1, 2)
        with django_assert_num_queries(1):
            assert jobs.add.get_result(plain.pk).replayed_by is None


@pytest.mark.django_db
class TestWaitOnFinishedJobs:
    """A job already finished: ``wait`` returns (or raises) at once, even inside a
    transaction (the test's own), and refreshes the caller's instance."""

    def test_returns_the_result_and_refreshes_the_instance(self) -> None:
        job = jobs.add.enqueue(20, 22)
        drain()
        assert job.wait(timeout=0) == 42
        assert (job.status, job.result) == (Status.SUCCEEDED, 42)
        assert job.finished_at is not None

    def test_no_timeout_means_no_limit(self) -> None:
        job = jobs.small_result.enqueue()
        drain()
        assert job.wait() == {"ok": True}

    def test_a_timedelta_is_a_timeout(self) -> None:
        job = jobs.add.enqueue(1, 2)
        drain()
        assert job.wait(timeout=dt.timedelta(seconds=1)) == 3

    def test_a_dead_job_raises_job_failed_error_with_its_error_and_status(self) -> None:
        job = _dead()
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=1)
        error = caught.value
        assert (error.job_id, error.name, error.status) == (job.pk, job.name, Status.DEAD)
        assert "this input can never work" in error.error
        assert error.replayed_by is None
        assert str(error) == f"Job {job.pk} ({job.name}) is dead: {job.last_error}"
        assert isinstance(error, LeaseJobsError)

    def test_a_dead_job_that_was_replayed_names_the_replaying_job(self) -> None:
        job = _dead()
        replay = protocol.replay(DeadLetter.objects.get(job=job).pk)
        with pytest.raises(JobFailedError, match=f"replayed as job {replay.pk}") as caught:
            job.wait(timeout=1)
        assert caught.value.replayed_by == replay.pk
        assert job.replayed_by == replay

    def test_a_job_cancelled_before_it_ran_raises_job_failed_error(self) -> None:
        job = jobs.add.enqueue(1, 2, delay=3600)
        assert protocol.cancel(job.pk)
        with pytest.raises(
            JobFailedError, match=rf"Job {job.pk} \(testapp.jobs.add\) was cancelled\.$"
        ) as caught:
            job.wait(timeout=0)
        assert (caught.value.status, caught.value.error) == (Status.CANCELLED, "")

    def test_the_error_is_exported_from_the_package(self) -> None:
        assert django_leasejobs.JobFailedError is JobFailedError
        from django_leasejobs.testing import JobFailedError as from_testing

        assert from_testing is JobFailedError

    def test_await_result_returns_the_result(self) -> None:
        job = jobs.add.enqueue(4, 5)
        drain()
        # async_to_sync: the reads run in this thread, inside the test's transaction.
        assert async_to_sync(_await)(job, 0) == 9
        assert job.result == 9


async def _await(job: Job, timeout: object) -> object:
    return await job.await_result(timeout=timeout)


@pytest.mark.django_db
class TestWaitRefusals:
    def test_a_job_not_finished_inside_a_transaction_is_refused(self) -> None:
        job = jobs.add.enqueue(1, 2)
        assert transaction.get_connection().in_atomic_block  # the test's own transaction
        with pytest.raises(RuntimeError, match=r"inside transaction.atomic\(\).*cannot even start"):
            job.wait(timeout=5)
        with pytest.raises(RuntimeError, match=r"inside transaction.atomic\(\)"):
            async_to_sync(_await)(job, 5)

    def test_a_failed_job_with_retries_left_is_not_finished(self) -> None:
        job = jobs.flaky.enqueue(succeed_on=2)
        drain(until_empty=False)  # one attempt: it fails, a retry waits
        job.refresh_from_db()
        assert job.status == Status.FAILED
        with pytest.raises(RuntimeError, match="which is failed, inside"):
            job.wait(timeout=0)

    def test_an_unsaved_job_is_refused(self) -> None:
        with pytest.raises(ValueError, match="never saved"):
            Job(name="testapp.jobs.add").wait(timeout=0)

    def test_a_deleted_job_raises_does_not_exist(self) -> None:
        job = jobs.add.enqueue(1, 2)
        Job.objects.filter(pk=job.pk).delete()
        with pytest.raises(Job.DoesNotExist, match="no longer exists"):
            job.wait(timeout=0)

    @pytest.mark.parametrize(
        ("bad", "error", "match"),
        [
            (-1, ValueError, "0 or more seconds"),
            (-0.001, ValueError, "0 or more seconds"),
            (math.nan, ValueError, "0 or more seconds"),
            (math.inf, ValueError, "0 or more seconds"),
            (dt.timedelta(seconds=-1), ValueError, "0 or more seconds"),
            ("5", TypeError, "not str"),
            (True, TypeError, "not bool"),
        ],
    )
    def test_bad_timeouts_are_refused_before_anything_is_read(
        self, bad, error, match, django_assert_num_queries
    ) -> None:
        job = jobs.add.enqueue(1, 2)
        with django_assert_num_queries(0), pytest.raises(error, match=match):
            job.wait(timeout=bad)
        with pytest.raises(error, match=match):
            async_to_sync(_await)(job, bad)


@pytest.mark.django_db(transaction=True)
class TestTimeout:
    def test_a_job_that_does_not_finish_in_time_raises_timeout_error(self) -> None:
        job = jobs.add.enqueue(1, 2, delay=3600)  # never due during the test
        with pytest.raises(TimeoutError, match=f"Job {job.pk} did not finish within 0.2 s"):
            job.wait(timeout=0.2)
        assert job.status == Status.PENDING

    def test_a_zero_timeout_looks_once(self) -> None:
        job = jobs.add.enqueue(1, 2, delay=3600)
        with pytest.raises(TimeoutError, match="within 0 s"):
            job.wait(timeout=0)

    def test_await_result_times_out_too(self) -> None:
        job = jobs.add.enqueue(1, 2, delay=3600)
        with pytest.raises(TimeoutError, match=r"within 0\.2 s"):
            async_to_sync(_await)(job, 0.2)


def test_payloads_parse_back_and_ignore_what_is_not_an_id() -> None:
    ids = list(range(1, 1000))
    payloads = notify.finished_payloads(ids)
    assert len(payloads) == 4
    assert sorted(i for p in payloads for i in notify.finished_ids(p)) == ids
    assert notify.finished_ids("3,x,,-4, 5,\u00b2") == {3, 5}
    assert notify.finished_payloads([]) == []
