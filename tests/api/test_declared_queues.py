"""With ``LEASEJOBS_QUEUES`` set, an API enqueue to a queue it does not list is refused."""

from __future__ import annotations

from django.test import override_settings

from django_leasejobs.models import Job


@override_settings(LEASEJOBS_QUEUES=["default", "emails"])
def test_the_api_answers_400(operator) -> None:
    status, body = operator.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "queue": "mial"}
    )
    assert (status, body["code"]) == (400, "invalid")
    assert "LEASEJOBS_QUEUES lists default, emails" in body["message"]
    assert not Job.objects.exists()
