"""With ``LEASEJOBS_QUEUES`` set, an enqueue to a queue it does not list is refused: no worker
would ever serve it, and the job would wait for ever without a word."""

from __future__ import annotations

import pytest
from django.test import override_settings
from testapp import jobs

from django_leasejobs import JobValidationError
from django_leasejobs.models import Job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("declared")]

REFUSED = "Unknown queue\\(s\\) mial: LEASEJOBS_QUEUES lists default, emails"


@pytest.fixture
def declared():
    with override_settings(LEASEJOBS_QUEUES=["default", "emails"]):
        yield


def test_an_undeclared_queue_is_refused_and_nothing_is_written() -> None:
    with pytest.raises(JobValidationError, match=REFUSED):
        jobs.noop.enqueue(queue="mial")
    with pytest.raises(JobValidationError, match=REFUSED):
        jobs.noop.enqueue_many([{"args": [], "queue": "emails"}, {"args": [], "queue": "mial"}])
    assert not Job.objects.exists()


def test_declared_queues_are_taken() -> None:
    assert jobs.noop.enqueue(queue="emails").queue == "emails"
    assert jobs.noop.enqueue().queue == "default"


def test_a_jobs_own_undeclared_queue_is_refused_at_enqueue() -> None:
    """``other_queue`` is ``@job(queue="other")``: its plain enqueue is refused too."""
    with pytest.raises(JobValidationError, match="Unknown queue\\(s\\) other"):
        jobs.other_queue.enqueue()
    with pytest.raises(JobValidationError, match="Unknown queue\\(s\\) other"):
        jobs.other_queue.enqueue_many([((), {})])
    assert not Job.objects.exists()


def test_without_the_setting_any_queue_goes() -> None:
    with override_settings(LEASEJOBS_QUEUES=None):
        assert jobs.noop.enqueue(queue="mial").queue == "mial"
