"""The helpers through the pytest plugin's fixtures (``leasejobs``, ``leasejobs_worker``)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.db import transaction

from django_leasejobs import JobFailedError
from django_leasejobs.models import Job

from .shop import jobs
from .shop.checkout import place_order


@pytest.mark.django_db
class TestInATransaction:
    def test_assert_and_refute(self, leasejobs: Any) -> None:
        place_order(1, "a@example.com", 250)
        leasejobs.assert_enqueued(jobs.send_receipt, kwargs={"lines": [["tea", 250]]})
        with pytest.raises(AssertionError, match=r"Expected no job matching .*charge, found 1:"):
            leasejobs.refute_enqueued(jobs.charge)
        with pytest.raises(AssertionError, match=r"found 0\.\nEnqueued instead:\n  #\d+ "):
            leasejobs.assert_enqueued(jobs.send_receipt, queue="default")

    def test_capture_run_and_drain(self, leasejobs: Any) -> None:
        with leasejobs.capture_jobs() as captured:
            place_order(2, "b@example.com", 100)
        assert len(captured.jobs) == 2
        with pytest.raises(ConnectionError, match="gateway timeout"):
            leasejobs.run_job(jobs.charge, 2, 100)
        summary = leasejobs.drain(with_scheduled=True)
        assert (summary.succeeded, summary.retried, summary.dead) == (3, 1, 0)

    def test_travel(self, leasejobs: Any) -> None:
        place_order(3, "c@example.com", 100)
        leasejobs.travel(301)
        assert leasejobs.drain().retried == 1
        leasejobs.travel(61)
        assert leasejobs.drain().succeeded == 1


@pytest.mark.django_db(transaction=True)
class TestCommitted:
    def test_a_burst_worker_on_the_test_database(
        self, leasejobs: Any, leasejobs_worker: Any
    ) -> None:
        place_order(4, "d@example.com", 100)
        assert leasejobs_worker.run().succeeded == 1
        leasejobs.travel(301)
        assert leasejobs_worker.run().retried == 1
        leasejobs.travel(61)
        assert leasejobs_worker.run().succeeded == 1
        leasejobs.refute_enqueued()

    def test_eager_runs_at_commit_and_raises_there(self, leasejobs: Any, settings: Any) -> None:
        settings.LEASEJOBS_EAGER = True
        with transaction.atomic():
            row = jobs.send_receipt.enqueue(5, email="e@example.com")
            assert Job.objects.get(pk=row.pk).status == "pending"
        assert Job.objects.get(pk=row.pk).result == "receipt 5 to e@example.com (0 lines)"
        with pytest.raises(JobFailedError, match="order 6 is broken") as raised:
            jobs.broken.enqueue(6)  # outside a transaction: runs at once
        assert isinstance(raised.value.__cause__, ValueError)  # the handler's own error
        assert raised.value.status == "failed"
        assert "failed on attempt 1 of 2: ValueError: order 6 is broken; its retry waits" in str(
            raised.value
        )
        with pytest.raises(JobFailedError, match="order 7 is broken"), transaction.atomic():
            jobs.broken.enqueue_many([((7,), {})])

    def test_tasks(self, leasejobs: Any, settings: Any) -> None:
        settings.LEASEJOBS_TASK_MODULES = ["tests.outside_project"]
        tasks = importlib.import_module("tests.outside_project.shop.tasks")
        tasks.restock.enqueue("tea", 2)
        leasejobs.assert_enqueued(tasks.restock, args=["tea", 2])
        settings.LEASEJOBS_EAGER = True
        result = tasks.restock.enqueue("cake", 1)
        assert Job.objects.get(pk=int(result.id)).result == "1 x cake"
