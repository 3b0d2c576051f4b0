"""Every list's search takes its first words: a search of 1,200 words made SQLite refuse the
statement ("Expression tree is too large"), a server error, on the lists that used Django's
own search. The job list has its own search (tests/admin/test_job_search.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from testapp import jobs

from django_leasejobs.admin.base import MAX_WORDS
from django_leasejobs.models import ApiToken, DeadLetter, Job, Schedule, WorkflowRun

from .conftest import url

pytestmark = pytest.mark.django_db

NAME = "nightly-report"
FIRST = ["nightly", "report", "night", "ly", "rep", "ort", NAME, "ght", '"y-r"', "po"]
"""Ten distinct words, each a part of ``NAME`` (a quoted phrase among them)."""


def run() -> int:
    return WorkflowRun.objects.create(name=NAME).pk


def letter() -> int:
    job = Job.objects.create(name=jobs.noop.name, status="dead")
    return DeadLetter.objects.create(job=job, name=NAME, queue="default", reason="x").pk


def schedule() -> int:
    return Schedule.objects.create(name=NAME, job=jobs.noop.name, cron="0 3 * * *").pk


def token() -> int:
    user = User.objects.get(username="admin")
    return ApiToken.objects.create(name=NAME, user=user, digest="d" * 64, prefix="p").pk


@pytest.mark.parametrize(
    ("changelist", "make", "other"),
    [
        ("workflowrun_changelist", run, lambda: WorkflowRun.objects.create(name="other")),
        ("deadletter_changelist", letter, None),
        ("schedule_changelist", schedule, None),
        ("apitoken_changelist", token, None),
    ],
)
def test_a_search_of_many_words_uses_its_first_words_and_says_so(
    admin_client, changelist: str, make: Callable[[], int], other: Callable[[], object] | None
) -> None:
    assert len(FIRST) == MAX_WORDS
    wanted = make()
    if other is not None:
        other()
    rest = [f"no-such-word-{n}" for n in range(1200)]  # each would find nothing
    response = admin_client.get(url(changelist), {"q": " ".join([*FIRST, *rest])})
    assert response.status_code == 200
    assert [row.pk for row in response.context["cl"].result_list] == [wanted]
    page = response.content.decode()
    assert f"The search used its first {MAX_WORDS} words only (it had 1,210)" in page
    few = admin_client.get(url(changelist), {"q": " ".join([*FIRST, FIRST[0]])})
    assert [row.pk for row in few.context["cl"].result_list] == [wanted]
    assert "The search used its first" not in few.content.decode()
