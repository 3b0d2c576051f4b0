"""The backend reached through the django-tasks backport, on whichever Django runs the suite.

On Django 5.2 the backport is the framework; on Django 6 ``django.tasks`` is, and a task declared
with ``django_tasks.task`` still enqueues, runs and reports through this backend.
"""

from __future__ import annotations

import pytest

from django_leasejobs import protocol
from django_leasejobs.models import Job
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import execution
from django_leasejobs.tasks.backend import LeaseJobsBackend

django_tasks = pytest.importorskip("django_tasks")

pytestmark = pytest.mark.django_db


def test_a_backport_task_enqueues_runs_and_reports_through_this_backend() -> None:
    from testapp import backport_tasks

    assert type(django_tasks.task_backends["default"]) is LeaseJobsBackend
    result = backport_tasks.multiply.enqueue(3, 4)
    job = Job.objects.get(pk=int(result.id))
    assert (job.name, job.task_backend) == ("testapp.backport_tasks.multiply", "default")
    claimed = protocol.claim("w1", batch=1)
    assert execution.run(claimed[0], "w1") == Outcome.SUCCEEDED
    result.refresh()
    assert result.return_value == 12
    fetched = django_tasks.default_task_backend.get_result(result.id)
    assert (fetched.return_value, fetched.worker_ids) == (12, ["w1"])
