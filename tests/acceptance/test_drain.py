"""Three workers of four threads drain 2,000 jobs: each succeeds exactly once, none early."""

from __future__ import annotations

import signal

import pytest
from django.db.models import Count
from testapp import jobs
from testapp.models import Hit

from django_leasejobs.models import Job, Status

from ..invariants import check_invariants, wait_for
from .conftest import FAST

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

COUNT = 2000


def test_three_workers_drain_2000_jobs_each_exactly_once(spawn) -> None:
    items = [
        {"args": [f"job{i}"], **({"delay": 1 + (i % 3)} if i % 10 == 0 else {})}
        for i in range(COUNT)
    ]
    enqueued = jobs.record.enqueue_many(items)
    ids = [job.pk for job in enqueued]
    run_at = dict(Job.objects.filter(pk__in=ids).values_list("pk", "run_at"))
    # No fault here, so no lease may expire: FAST's 2 s lease was seen to run out on SQLite
    # under CI's load, where three processes' claims and completions take the one write lock
    # and a heartbeat's UPDATE waits its turn (lease expiry has its own tests).
    options = ["--concurrency", "4", "--batch", "8", *FAST, "--lease", "10"]
    workers = [spawn(*options, name=f"d{n}") for n in range(3)]

    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED).count() == COUNT,
        timeout=180,
        what="2,000 jobs succeeded",
    )
    for worker in workers:
        worker.send(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0

    rows = check_invariants(ids, expected_count=COUNT)
    assert {(row.status, row.attempt, len(row.errors)) for row in rows} == {
        (Status.SUCCEEDED, 1, 0)
    }
    early = [row.pk for row in rows if row.started_at < run_at[row.pk]]
    assert early == []
    hits = dict(
        Hit.objects.filter(job_id__in=ids)
        .values("job_id")
        .annotate(n=Count("id"))
        .values_list("job_id", "n")
    )
    assert set(hits) == set(ids)  # every side effect recorded at least once
    owners = set(Job.objects.filter(pk__in=ids).values_list("lease_owner", flat=True))
    assert owners == {""}
    per_worker = [w.log().count("job.running") for w in workers]
    assert sum(per_worker) == COUNT
