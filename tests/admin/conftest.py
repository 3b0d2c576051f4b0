"""Admin fixtures: users with exactly the permissions a test needs, and jobs in every state."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.dialects.base import after
from django_leasejobs.models import DeadLetter, Job, Schedule
from django_leasejobs.protocol import Failure
from django_leasejobs.runtime import execution

from ..conftest import shifted

VIEW = ["view_job", "view_deadletter", "view_schedule"]
SCRIPT = "<script>alert('x')</script>"


def staff_client(username: str, codenames: list[str]) -> Client:
    # No password: force_login needs none, and hashing one costs ~0.3 s per user.
    user = User.objects.create_user(username, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="django_leasejobs", codename__in=codenames
        )
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_user(db) -> User:
    """pytest-django's superuser, without the slow password hash (tests use force_login)."""
    return User.objects.create_superuser("admin")


@pytest.fixture
def viewer(db) -> Client:
    """Staff who may look at everything and change nothing."""
    return staff_client("viewer", VIEW)


@pytest.fixture
def operator(db) -> Client:
    """Staff with every operator permission (but not superuser)."""
    return staff_client(
        "operator", [*VIEW, "cancel_job", "run_job_now", "replay_deadletter", "change_schedule"]
    )


def claim(job: Job) -> Job:
    claimed = protocol.claim("admin-test-worker", batch=1)
    assert [c.pk for c in claimed] == [job.pk]
    return claimed[0]


@pytest.fixture
def failed_job(db, make_due) -> Callable[..., Job]:
    """A job whose attempt failed and that waits out its backoff."""

    def make(error: str = "boom", traceback: str = "Traceback: boom") -> Job:
        job = jobs.noop.enqueue(max_attempts=3)
        make_due(job)
        running = claim(job)
        protocol.fail(job.pk, running.attempt, Failure(error, traceback))
        Job.objects.filter(pk=job.pk).update(run_at=after(3600))
        return Job.objects.get(pk=job.pk)

    return make


@pytest.fixture
def dead_letter(db, make_due) -> Callable[..., DeadLetter]:
    """A dead letter of ``testapp.jobs.add`` whose error and traceback are chosen by the test."""

    def make(*args: object, error: str = "boom", traceback: str = "Traceback: boom") -> DeadLetter:
        job = jobs.add.enqueue(*(args or (1, 2)), max_attempts=1)
        make_due(job)
        running = claim(job)
        protocol.fail(job.pk, running.attempt, Failure(error, traceback))
        return DeadLetter.objects.get(job=job)

    return make


@pytest.fixture
def run_due() -> Callable[[], list[Job]]:
    """Run every due job in-process, as a worker would; return the rows afterwards."""

    def run() -> list[Job]:
        ran = []
        while claimed := protocol.claim("admin-test-worker", batch=10):
            for job in claimed:
                execution.run(job, "admin-test-worker")
                ran.append(job.pk)
        return list(Job.objects.filter(pk__in=ran).order_by("pk"))

    return run


def url(name: str, *args: object) -> str:
    return reverse(f"admin:django_leasejobs_{name}", args=args)


@pytest.fixture
def hourly(db) -> Schedule:
    schedule = Schedule.objects.create(
        name="hourly", cron="0 * * * *", timezone="UTC", job="testapp.jobs.noop"
    )
    Schedule.objects.filter(pk=schedule.pk).update(created_at=shifted(-7 * 86400))
    schedule.refresh_from_db()
    return schedule


def occurrence_job(schedule: Schedule, at: dt.datetime, status: str, **fields) -> Job:
    """A job as the scheduler would have emitted it for ``at``, then moved to ``status``."""
    job = jobs.noop.enqueue()
    Job.objects.filter(pk=job.pk).update(
        schedule=schedule, occurrence_at=at, status=status, **fields
    )
    return Job.objects.get(pk=job.pk)
