"""django.tasks tasks on the in-process Worker: every task's result goes through write_result.

The worker groups plain successes into one completion statement; tasks are kept out of that
path so their ``task_finished`` signal is sent and the finishing worker is recorded.
"""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Job, Status
from django_leasejobs.runtime.worker import Worker

from ..conftest import shifted

try:
    from django.tasks import TaskResultStatus
    from django.tasks.signals import task_finished
except ImportError:  # Django 5.2: the backport
    pytest.importorskip("django_tasks")
    from django_tasks import TaskResultStatus
    from django_tasks.signals import task_finished

from testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05, "scheduler": False}


@pytest.fixture
def finished():
    seen: list[tuple[str, str]] = []

    def record(sender, task_result, **kwargs):
        seen.append((task_result.id, task_result.status))

    task_finished.connect(record, weak=False)
    yield seen
    task_finished.disconnect(record)


def test_tasks_returning_none_still_send_task_finished(finished) -> None:
    counted = tasks.record.enqueue(label="a")
    silent = tasks.sleep.enqueue(0, label="b")  # returns None, like a groupable job
    native = jobs.noop.enqueue()
    worker = Worker(concurrency=2, **FAST)
    summary = worker.run(burst=True)
    assert summary.succeeded == 3
    assert sorted(finished) == sorted(
        [(counted.id, TaskResultStatus.SUCCESSFUL), (silent.id, TaskResultStatus.SUCCESSFUL)]
    )
    silent.refresh()
    worker_id = worker.options.worker_id
    assert silent.worker_ids == [worker_id]
    assert Job.objects.get(pk=native.pk).finished_by == worker_id  # grouped completion


def test_a_task_dead_lettered_by_the_workers_lease_recovery_sends_task_finished(finished):
    result = tasks.add.using(max_attempts=1).enqueue(1, 2)
    protocol.claim("ghost", batch=1)  # a worker that then died
    Job.objects.filter(pk=int(result.id)).update(lease_expires_at=shifted(-1))
    Worker(**FAST).run(burst=True)
    assert Job.objects.get(pk=int(result.id)).status == Status.DEAD
    assert finished == [(result.id, TaskResultStatus.FAILED)]
