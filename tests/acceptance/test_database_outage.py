"""The database goes away under a running worker: it reconnects, and every job ends once.

PostgreSQL only: terminating a backend and restarting the server have no SQLite equivalent.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from django.db import connection
from testapp import jobs
from testapp.models import Hit

from django_leasejobs.models import Job, Status

from ..invariants import check_invariants, wait_for
from .conftest import FAST

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL fault: terminated backends and a server restart")


def finished(ids: list[int]) -> int:
    return Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED).count()


def terminate_backends(application_name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            [application_name],
        )
        return cursor.fetchone()[0]


def restart_postgresql() -> None:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
    connection.close()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    wait_for(
        lambda: subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1"]).returncode == 0,
        what="PostgreSQL back",
    )


def test_terminated_connections_and_a_restart_every_job_ends_once(spawn) -> None:
    ids = [j.pk for j in jobs.sleep.enqueue_many([((0.05,), {"label": "o"})] * 300)]
    worker = spawn("--concurrency", "4", *FAST, name="outage")

    wait_for(lambda: finished(ids) >= 30, what="work under way")
    assert terminate_backends(worker.worker_id) >= 1
    wait_for(lambda: finished(ids) >= 120, what="work after terminated connections")

    restart_postgresql()
    wait_for(lambda: finished(ids) == len(ids), timeout=120, what="all jobs done")
    assert worker.alive()
    assert "worker.database_error" in worker.log()

    worker.send(signal.SIGTERM)
    assert worker.wait() == 0
    rows = check_invariants(ids, expected_count=len(ids))
    assert {row.status for row in rows} == {Status.SUCCEEDED}
    ran = set(Hit.objects.filter(job_id__in=ids).values_list("job_id", flat=True))
    assert ran == set(ids)
