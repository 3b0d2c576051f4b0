"""``protocol.retry_now``: the admin's "retry now", guarded on ``failed`` alone."""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.dialects.base import after
from django_leasejobs.models import Job, Status
from django_leasejobs.protocol import Failure

pytestmark = pytest.mark.django_db


def test_retry_now_makes_a_failed_job_due_and_refuses_other_states(make_due) -> None:
    job = jobs.noop.enqueue(max_attempts=3, delay=3600)
    assert not protocol.retry_now(job.pk)  # pending: refused, run_at unchanged
    assert protocol.claim("w1", batch=1) == []
    make_due(job)
    running = protocol.claim("w1", batch=1)[0]
    assert not protocol.retry_now(job.pk)  # running: refused
    protocol.fail(job.pk, running.attempt, Failure("x"))
    Job.objects.filter(pk=job.pk).update(run_at=after(3600))
    assert protocol.claim("w1", batch=1) == []
    assert protocol.retry_now(job.pk)
    again = protocol.claim("w1", batch=1)
    assert [(j.pk, j.attempt) for j in again] == [(job.pk, 2)]
    assert Job.objects.get(pk=job.pk).status == Status.RUNNING
