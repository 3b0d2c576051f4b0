"""Threads per queue: ``--queues mail:10,reports:2`` gives each queue its own pool threads.

A queue full of slow jobs takes only its own threads, so another queue's jobs keep running;
the plain form keeps one pool shared by every queue (where the slow jobs do take every thread:
the control case). Measured by counts on the real database, never by timing.
"""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import JobValidationError, job
from django_leasejobs.checks.queues import check_budget_like_queues
from django_leasejobs.core import validation
from django_leasejobs.models import Job, Pause, Status
from django_leasejobs.runtime.worker import Worker, parse_queues

from ..invariants import wait_for
from .test_worker import FAST, Background


def report() -> None:
    """Declared as a job by a test, with a queue name that is refused."""


class TestParse:
    def test_plain_names_share_the_pool_and_budgets_give_each_its_threads(self) -> None:
        assert parse_queues("mail,reports") == ["mail", "reports"]
        assert parse_queues(" mail:10 , reports:2 ") == {"mail": 10, "reports": 2}
        assert parse_queues("*") is None

    @pytest.mark.parametrize(
        ("text", "says"),
        [
            ("mail:10,reports", "give every queue its threads (name:threads) or none"),
            ("mail:0", "queue mail needs at least 1 thread, not 0"),
            ("mail:2,mail:3", "queue mail is given twice"),
            (":3", "a budget needs a queue name"),
            ("mail:2,,b:1", "comma-separated queue names"),
        ],
    )
    def test_bad_budgets_are_refused(self, text: str, says: str) -> None:
        with pytest.raises(ValueError, match=re.escape(says)):
            parse_queues(text)

    def test_the_worker_refuses_budgets_with_a_concurrency_or_without_threads(self) -> None:
        with pytest.raises(ValueError, match="not both"):
            Worker({"mail": 2}, concurrency=4)
        with pytest.raises(ValueError, match="the threads of queue 'mail' must be a positive"):
            Worker({"mail": 0})
        with pytest.raises(ValueError, match="at least one queue"):
            Worker({})
        worker = Worker({"mail": 3, "reports": 1})
        assert (worker.options.queues, worker.options.concurrency) == (["mail", "reports"], 4)
        assert [(lane.queues, lane.threads) for lane in worker.loop.room.lanes] == [
            (["mail"], 3),
            (["reports"], 1),
        ]


@pytest.mark.django_db
class TestCommand:
    def test_budgets_with_concurrency_are_refused(self) -> None:
        with pytest.raises(CommandError, match="gives each queue its threads: --concurrency"):
            call_command("runjobworker", "--queues", "mail:2,reports:1", "--concurrency", "3")

    def test_a_budget_for_some_queues_only_is_refused(self) -> None:
        with pytest.raises(CommandError, match="reports has none"):
            call_command("runjobworker", "--queues", "mail:2,reports")


@pytest.mark.django_db
class TestNames:
    """A trailing ``:<digits>`` is always a budget: no new queue may be named so."""

    def test_an_enqueue_refuses_it(self) -> None:
        with pytest.raises(JobValidationError, match="'mail:10' ends in ':' and digits"):
            jobs.noop.enqueue(queue="mail:10")
        assert not Job.objects.exists()
        assert jobs.noop.enqueue(queue="mail:v2").queue == "mail:v2"  # not digits: a name

    def test_a_job_declaration_and_the_settings_refuse_it(self, settings) -> None:
        with pytest.raises(JobValidationError, match="ends in ':' and digits"):
            job(queue="reports:2")(report)
        settings.LEASEJOBS_QUEUES = ["mail", "reports:2"]
        from django.core.exceptions import ImproperlyConfigured

        from django_leasejobs.core.conf import settings as leasejobs

        with pytest.raises(ImproperlyConfigured, match="not ending in ':' and digits"):
            leasejobs.QUEUES  # noqa: B018
        with pytest.raises(JobValidationError):
            validation.check_queue("1:2")

    def test_the_database_check_names_queues_already_in_use(self) -> None:
        assert check_budget_like_queues(databases=["default"]) == []
        Pause.objects.create(kind="queue", name="legacy:2")  # as made before the rule
        Pause.objects.create(kind="queue", name="mail")
        (warning,) = check_budget_like_queues(databases=["default"])
        assert warning.id == "leasejobs.W013"
        assert "Queue 'legacy:2' ends in ':' and digits" in warning.msg
        assert check_budget_like_queues(databases=None) == []  # a plain check: no query


@pytest.mark.django_db(transaction=True)
class TestStarvation:
    SLOW, FAST_JOBS = 4, 5

    def enqueue(self) -> tuple[list[Job], list[Job]]:
        """Slow jobs first in line (a higher priority), then quick ones in another queue."""
        slow = [
            jobs.sleep.enqueue(seconds=120, queue="reports", priority=10) for _ in range(self.SLOW)
        ]
        quick = [jobs.noop.enqueue(queue="mail") for _ in range(self.FAST_JOBS)]
        return slow, quick

    @staticmethod
    def count(found: list[Job], status: str) -> int:
        return Job.objects.filter(pk__in=[j.pk for j in found], status=status).count()

    def test_a_queue_of_slow_jobs_does_not_starve_another_with_budgets(self) -> None:
        slow, quick = self.enqueue()
        worker = Worker({"reports": 2, "mail": 1}, **FAST, scheduler=False)
        with Background(worker):
            wait_for(lambda: self.count(quick, Status.SUCCEEDED) == self.FAST_JOBS)
            assert Hit.objects.count() == 0  # no slow job has finished: mail did not wait
            assert self.count(slow, Status.RUNNING) >= 2  # reports used its threads meanwhile
            worker.stop("test over", grace=0)  # the slow ones are released, not waited for
        assert self.count(slow, Status.PENDING) == self.SLOW  # released unspent

    def test_the_shared_pool_is_taken_by_the_slow_queue(self) -> None:
        """The control: the same jobs on one pool of as many threads."""
        slow, quick = self.enqueue()
        worker = Worker(["reports", "mail"], concurrency=3, **FAST, scheduler=False)
        with Background(worker):
            wait_for(lambda: self.count(slow, Status.RUNNING) >= 3)
            # Every thread holds a slow job; the quick ones were never claimed.
            assert self.count(quick, Status.PENDING) == self.FAST_JOBS
            worker.stop("test over", grace=0)
        assert self.count(quick, Status.SUCCEEDED) == 0
