"""``LEASEJOBS_RETENTION`` in real worker processes: two workers, one pruner.

Old jobs are made old by moving ``finished_at`` back in the database, never by waiting.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest
from testapp import jobs

from django_leasejobs import protocol, upkeep
from django_leasejobs.models import Job, MaintenanceLease
from django_leasejobs.runtime import execution

from ..conftest import shifted
from ..invariants import wait_for
from .conftest import WorkerProcess, wait_started

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

OPTIONS = ["--lease", "5", "--heartbeat", "1", "--poll", "0.1", "--no-scheduler"]
OLD = 1200


def test_two_workers_prune_old_jobs_and_only_one_of_them_does(
    spawn: Callable[..., WorkerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    created = jobs.noop.enqueue_many([((), {})] * OLD)
    while claimed := protocol.claim("setup", batch=200):
        for job in claimed:
            execution.run(job, "setup")
    Job.objects.filter(pk__in=[job.pk for job in created]).update(finished_at=shifted(-8 * 86400))
    recent = jobs.noop.enqueue()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "testproject.retention_settings")
    workers = [spawn(*OPTIONS, name=name) for name in ("a", "b")]
    for worker in workers:
        wait_started(worker)
    wait_for(lambda: Job.objects.count() == 1, what="the old jobs pruned")
    assert Job.objects.get().pk == recent.pk  # run by a worker, kept: it is recent
    holder = MaintenanceLease.objects.get(name=upkeep.RETENTION).holder
    assert holder in {w.worker_id for w in workers}
    wait_for(lambda: any("worker.retention" in w.log() for w in workers), what="the log line")
    for worker in workers:
        worker.send(signal.SIGTERM)
        assert worker.wait() == 0, worker.log()
    pruners = [w.worker_id for w in workers if "job.pruned" in w.log()]
    assert pruners == [holder]
    assert f"worker.retention id={holder} succeeded={OLD}" in next(
        w.log() for w in workers if w.worker_id == holder
    )
