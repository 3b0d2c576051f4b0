"""A rolling deploy through real worker processes: a job enqueued by the new release waits while
only workers of the old release run, and a worker of the new release takes it at its start.

The project is the shop of :mod:`.test_project_modules`: release 1 as written there, release 2
the same with ``shop/orders/jobs.py`` (discovered at start) adding ``ship``. Time is controlled
by moving timestamps in the database, never by sleeping.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from django.db.models import F

from django_leasejobs.models import DeadLetter, Job, Status

from ..conftest import shifted
from .test_project_modules import Project, write_project

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

SHIP = "shop.orders.jobs.ship"
RELEASE_2 = """
    from django_leasejobs import job

    @job
    def ship(order):
        return f"shipped {order}"
"""


@pytest.fixture
def release_1(tmp_path: Path) -> Project:
    return write_project(tmp_path, None)


def deploy_release_2(project: Project) -> None:
    (project.root / "shop" / "orders" / "jobs.py").write_text(textwrap.dedent(RELEASE_2))


def test_an_old_worker_defers_a_new_job_and_a_new_worker_runs_it_at_start(
    release_1: Project,
) -> None:
    job = Job.objects.create(name=SHIP, args=[7])  # a producer of release 2 enqueued it
    ran = release_1.burst()
    # Said once, by the console (no LOGGING here), with why: "deferred  #1 shop.orders...".
    assert f"deferred  #{job.pk} {SHIP} in " in ran.stdout
    assert f"{SHIP!r} is not registered here" in ran.stdout
    assert "job.deferred" not in ran.stderr
    job.refresh_from_db()
    assert (job.status, job.deferrals, job.attempt, job.released) == (Status.PENDING, 1, 1, 1)
    assert job.first_deferred_at is not None
    assert job.run_at == job.deferred_until
    assert not DeadLetter.objects.exists()

    # Its next try would be an hour away: only the new worker's wake-up can make it due now.
    Job.objects.filter(pk=job.pk).update(run_at=shifted(3600))
    Job.objects.filter(pk=job.pk).update(deferred_until=F("run_at"))
    release_1.burst()  # an old worker still running leaves it alone: not due
    job.refresh_from_db()
    assert (job.status, job.deferrals) == (Status.PENDING, 1)

    deploy_release_2(release_1)
    ran = release_1.burst()
    job.refresh_from_db()
    assert (job.status, job.result) == (Status.SUCCEEDED, "shipped 7"), ran.stderr
    assert job.attempt - job.released == 1  # the deferral cost no attempt
    assert not DeadLetter.objects.exists()
