"""Four workers finishing a group's members, each member killing its worker (kill -9) at a
crash point of its completion on its first attempt: the callback is released exactly once."""

from __future__ import annotations

import pytest
from django.db import connection
from testapp import workflow_jobs as w
from testapp.models import Hit

from django_leasejobs import group
from django_leasejobs.models import Job, RunStatus, Status, WorkflowRun

from ..conftest import shifted
from ..invariants import wait_for
from .conftest import FAST

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

WORKERS = 4
MEMBERS = 12


def test_kill_9_at_every_crash_point_releases_the_callback_once(spawn) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("PostgreSQL and MariaDB: row locks between worker processes")
    points = [w.CRASH_POINTS[i % len(w.CRASH_POINTS)] for i in range(MEMBERS)]
    members = [w.crashing_square.s(i, crash_at=point) for i, point in enumerate(points)]
    run = group(members).then(w.total.s()).enqueue()
    workers = [spawn("--concurrency", "1", *FAST, name=f"w{i}") for i in range(WORKERS)]
    killed: list[str] = []

    def settle() -> bool:
        """Replace killed workers, take their leases back at once, make retries due."""
        for index, worker in enumerate(workers):
            if not worker.alive():
                killed.append(worker.worker_id)
                workers[index] = spawn("--concurrency", "1", *FAST, name=f"r{len(killed)}")
        Job.objects.filter(status=Status.RUNNING, lease_owner__in=killed).update(
            lease_expires_at=shifted(-1)
        )
        Job.objects.filter(status=Status.FAILED).update(run_at=shifted(-1))
        return WorkflowRun.objects.get(pk=run.pk).status != RunStatus.RUNNING

    wait_for(settle, timeout=240, every=0.2, what="the run to finish")
    finished = WorkflowRun.objects.get(pk=run.pk)
    assert finished.status == RunStatus.SUCCEEDED
    assert (finished.steps_total, finished.steps_finished, finished.steps_succeeded) == (
        MEMBERS + 1,
        MEMBERS + 1,
        MEMBERS + 1,
    )
    callbacks = Job.objects.filter(workflow_step__run=run, name=w.total.name)
    assert callbacks.count() == 1
    assert callbacks.get().args == [[i * i for i in range(MEMBERS)]]
    assert Hit.objects.filter(label__startswith="total:").count() == 1
    # A worker killed takes every job it had claimed with it; the members whose first
    # attempt ran crashed there, at their point, and each point was hit.
    first_runs = {n: point for n, point in enumerate(points) if f"crashing:[{n}, 1]" in _labels()}
    assert set(first_runs.values()) == set(w.CRASH_POINTS), first_runs
    assert killed
    members_jobs = Job.objects.filter(workflow_step__run=run, name=w.crashing_square.name)
    attempts = {job.args[0]: (job.status, job.attempt) for job in members_jobs}
    for n, point in first_runs.items():
        status, attempt = attempts[n]
        assert status == Status.SUCCEEDED
        # A completion committed before the kill is not run again; the others ran again.
        assert (attempt == 1) == (point == "after_commit"), (n, point, attempt)


def _labels() -> set[str]:
    return set(Hit.objects.values_list("label", flat=True))
