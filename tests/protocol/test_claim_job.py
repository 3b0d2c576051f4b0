"""``claim_job``: one chosen waiting job, due or not, guarded by status like a claim."""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Job, Status

pytestmark = pytest.mark.django_db


def test_claims_a_job_that_is_not_due_yet_and_only_that_one() -> None:
    other = jobs.record.enqueue("due now", priority=10)
    later = jobs.record.enqueue("later", delay=3600)
    claimed = protocol.claim_job(later.pk, "tester", lease_seconds=30)
    assert claimed is not None
    assert (claimed.pk, claimed.status, claimed.attempt, claimed.lease_owner) == (
        later.pk,
        Status.RUNNING,
        1,
        "tester",
    )
    assert claimed.lease_expires_at is not None
    assert claimed.started_at is not None
    assert Job.objects.get(pk=other.pk).status == Status.PENDING


def test_refuses_a_job_that_is_running_or_finished() -> None:
    job = jobs.record.enqueue("x")
    assert protocol.claim_job(job.pk, "first") is not None
    assert protocol.claim_job(job.pk, "second") is None
    assert protocol.complete(job.pk, 1) is protocol.Outcome.SUCCEEDED
    assert protocol.claim_job(job.pk, "third") is None
    assert protocol.claim_job(10**9, "nobody") is None
