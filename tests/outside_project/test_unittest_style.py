"""The helpers from a ``django.test.TestCase``: every test runs inside a transaction."""

from __future__ import annotations

import importlib

from django.test import TestCase, override_settings

from django_leasejobs import JobFailedError, PermanentError, UnknownJobError
from django_leasejobs.models import Job
from django_leasejobs.testing import (
    assert_enqueued,
    capture_jobs,
    drain,
    enqueued,
    refute_enqueued,
    run_job,
    travel,
)

from .shop import jobs
from .shop.checkout import place_order

RECEIPT = "tests.outside_project.shop.jobs.send_receipt"


class AssertEnqueued(TestCase):
    def test_matches_arguments_as_json_and_kwargs_partially(self) -> None:
        place_order(1, "a@example.com", 250)
        rows = assert_enqueued(jobs.send_receipt, args=[1], kwargs={"email": "a@example.com"})
        assert [row.queue for row in rows] == ["mail"]
        assert_enqueued(RECEIPT, kwargs={"lines": (("tea", 250),)}, queue="mail", count=1)
        assert_enqueued(jobs.charge, args=(1, 250))
        assert len(enqueued()) == 2

    def test_failure_lists_what_was_enqueued_instead(self) -> None:
        place_order(1, "a@example.com", 250)
        with self.assertRaises(AssertionError) as raised:
            assert_enqueued(jobs.send_receipt, args=[2])
        message = str(raised.exception)
        assert message.startswith(f"Expected a job matching {RECEIPT} args=[2], found 0.\n")
        assert "Enqueued instead:\n" in message
        assert f"{RECEIPT} args=[1] kwargs={{'email': 'a@example.com'" in message
        assert "tests.outside_project.shop.jobs.charge args=[1, 250]" in message

    def test_count_and_the_empty_message(self) -> None:
        with self.assertRaises(AssertionError) as raised:
            assert_enqueued(jobs.send_receipt)
        assert str(raised.exception) == (
            f"Expected a job matching {RECEIPT}, found 0.\nEnqueued instead:\nNothing was enqueued."
        )
        place_order(1, "a@example.com", 250)
        with self.assertRaises(AssertionError) as raised:
            assert_enqueued(jobs.send_receipt, count=2)
        assert str(raised.exception).startswith(f"Expected 2 job(s) matching {RECEIPT}, found 1.\n")

    def test_refute_enqueued_lists_the_jobs_that_match(self) -> None:
        refute_enqueued(jobs.send_receipt)
        place_order(7, "b@example.com", 100)
        refute_enqueued(jobs.send_receipt, args=[8])
        refute_enqueued(jobs.send_receipt, queue="default")
        with self.assertRaises(AssertionError) as raised:
            refute_enqueued(jobs.send_receipt, kwargs={"email": "b@example.com"})
        message = str(raised.exception)
        assert message.startswith(
            f"Expected no job matching {RECEIPT} kwargs={{'email': 'b@example.com'}}, found 1:\n"
        )
        assert f"{RECEIPT} args=[7]" in message

    def test_capture_jobs_scopes_the_assertions_to_its_block(self) -> None:
        place_order(1, "a@example.com", 250)
        with capture_jobs() as captured:
            refute_enqueued(jobs.send_receipt)
            place_order(2, "c@example.com", 250)
            assert_enqueued(jobs.send_receipt, count=1, args=[2])
        assert [row.args[0] for row in captured.jobs] == [2, 2]
        assert_enqueued(jobs.send_receipt, count=2)


class RunJob(TestCase):
    def test_returns_the_result_after_a_json_round_trip(self) -> None:
        result = run_job(jobs.send_receipt, 5, email="d@example.com", lines=(("x", 1),))
        assert result == "receipt 5 to d@example.com (1 lines)"
        row = Job.objects.get(name=RECEIPT)
        assert (row.status, row.attempt, row.result) == ("succeeded", 1, result)

    def test_raises_the_handlers_error_and_records_the_attempt(self) -> None:
        with self.assertRaisesMessage(ConnectionError, "gateway timeout"):
            run_job(jobs.charge, 3, 100)
        assert_enqueued(jobs.charge, args=[3, 100])  # its retry waits
        with self.assertRaisesMessage(PermanentError, "order 4 refused"):
            run_job(jobs.refuse, 4)
        assert Job.objects.get(name=jobs.refuse.name).status == "dead"

    def test_an_unregistered_name_is_refused_as_an_enqueue_would(self) -> None:
        with self.assertRaisesMessage(UnknownJobError, "No job is registered as 'shop.gone'"):
            run_job("shop.gone")


class Drain(TestCase):
    def test_runs_due_jobs_and_leaves_later_ones(self) -> None:
        place_order(1, "a@example.com", 250)
        summary = drain()
        assert (summary.succeeded, summary.retried, summary.dead) == (1, 0, 0)
        refute_enqueued(jobs.send_receipt)
        assert_enqueued(jobs.charge)

    def test_with_scheduled_runs_later_jobs_and_retries_too(self) -> None:
        place_order(1, "a@example.com", 250)
        summary = drain(with_scheduled=True)
        assert (summary.succeeded, summary.retried, summary.dead) == (2, 1, 0)
        charged = Job.objects.get(name=jobs.charge.name)
        assert charged.result == {"order": 1, "cents": 250, "charged": True, "attempt": 2}

    def test_retries_end_in_a_dead_letter(self) -> None:
        jobs.broken.enqueue(9)
        summary = drain(until_empty=False)
        assert (summary.retried, summary.dead) == (1, 0)
        summary = drain()
        assert (summary.retried, summary.dead) == (0, 1)

    def test_queues_are_a_list(self) -> None:
        place_order(1, "a@example.com", 250)
        assert drain(["default"]).total == 0
        with self.assertRaisesMessage(ValueError, "queues must be a list of queue names"):
            drain("mail")  # type: ignore[arg-type]
        assert drain(["mail"]).succeeded == 1


class Travel(TestCase):
    def test_delays_and_backoff_fall_due_as_time_moves(self) -> None:
        place_order(1, "a@example.com", 250)
        drain()
        travel(290)
        assert drain().total == 0
        travel(15)
        assert drain().retried == 1  # the gateway times out; the retry waits 60 s
        travel(30)
        assert drain().total == 0
        travel(31)
        assert drain().succeeded == 1

    @override_settings(
        LEASEJOBS_SCHEDULES={
            "hourly": {"job": "tests.outside_project.shop.jobs.nightly_report", "cron": "0 * * * *"}
        }
    )
    def test_cron_occurrences_come_due(self) -> None:
        drain()  # syncs the schedule; its first occurrence is the next hour
        Job.objects.filter(name=jobs.nightly_report.name).delete()  # if the hour turned just now
        travel(3600)
        assert drain().succeeded == 1
        assert Job.objects.get(name=jobs.nightly_report.name).result == "report"
        assert drain().total == 0

    def test_refuses_a_negative_time(self) -> None:
        with self.assertRaisesMessage(ValueError, "travel() needs a number of seconds >= 0"):
            travel(-1)


@override_settings(LEASEJOBS_EAGER=True)
class Eager(TestCase):
    def test_an_enqueue_runs_at_commit(self) -> None:
        with self.captureOnCommitCallbacks(execute=True):
            jobs.send_receipt.enqueue(1, email="a@example.com", lines=[("tea", 250)])
            assert_enqueued(jobs.send_receipt)  # not yet: at commit
        refute_enqueued(jobs.send_receipt)
        receipt = Job.objects.get(name=RECEIPT)
        assert (receipt.status, receipt.result) == (
            "succeeded",
            "receipt 1 to a@example.com (1 lines)",
        )

    def test_the_handlers_error_raises_in_the_test_saying_what_became_of_the_job(self) -> None:
        with (
            self.assertRaisesMessage(JobFailedError, "order 2 is broken") as raised,
            self.captureOnCommitCallbacks(execute=True),
        ):
            jobs.broken.enqueue(2)
        assert isinstance(raised.exception.__cause__, ValueError)
        assert "its retry waits until" in str(raised.exception)
        assert Job.objects.get(name=jobs.broken.name).status == "failed"

    def test_a_delayed_job_waits_for_its_time(self) -> None:
        with self.captureOnCommitCallbacks(execute=True):
            place_order(3, "c@example.com", 250)  # the charge has delay=300
        assert Job.objects.get(name=jobs.charge.name).status == "pending"  # due in 300 s
        assert Job.objects.get(name=RECEIPT).status == "succeeded"  # ran at commit
        travel(301)
        assert drain().retried == 1  # its time came: it runs (the gateway times out once)


@override_settings(LEASEJOBS_TASK_MODULES=["tests.outside_project"])
class Tasks(TestCase):
    def test_helpers_take_task_objects(self) -> None:
        tasks = importlib.import_module("tests.outside_project.shop.tasks")
        assert run_job(tasks.restock, "tea", 3) == "3 x tea"
        tasks.restock.enqueue("cake", 1)
        assert_enqueued(tasks.restock, args=["cake", 1], count=1)
        with self.assertRaises(AssertionError) as raised:
            refute_enqueued(tasks.restock)
        assert "tests.outside_project.shop.tasks.restock args=['cake', 1]" in str(raised.exception)
        assert drain().succeeded == 1
