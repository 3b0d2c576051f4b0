"""A primary killed with ``kill -9`` and its synchronous standby promoted: the workers carry on.

PostgreSQL only. The test makes its own pair of servers (tests/acceptance/pg_servers.py:
initdb, pg_basebackup -R, on free ports, removed afterwards whatever happened). Workers and
the test reach them through libpq's multi-host string (``testproject.failover_settings``).
Time is the database's: retries come due by moving ``run_at``, never by waiting.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Min
from testapp import jobs

from django_leasejobs.models import DeadLetter, Job, Status

from ..conftest import shifted
from ..invariants import check_invariants, wait_for
from .conftest import FAST, MANAGE, ROOT, WorkerProcess, wait_started
from .pg_servers import Pair, server_pair

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
]

SETTINGS = "testproject.failover_settings"
RESUME_WITHIN = 30.0
"""Seconds from the promotion to the first job a worker finishes on the new primary."""


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL fault: a primary killed and its standby promoted")


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A primary and a synchronous standby streaming from it through a replication slot."""
    with server_pair("leasejobs-failover-", synchronous=True) as made:
        yield made


@contextlib.contextmanager
def on_the_pair(pair: Pair, django_db_blocker: Any) -> Iterator[None]:
    """This process's ORM on the pair, with the workers' settings, until the block ends."""
    settings_module = importlib.import_module(SETTINGS)
    wrapper = connections[DEFAULT_DB_ALIAS]
    saved = wrapper.settings_dict
    wrapper.close()
    wrapper.settings_dict = {**saved, **settings_module.pair_database(pair.ports)}
    try:
        with django_db_blocker.unblock():
            yield
    finally:
        wrapper.close()
        wrapper.settings_dict = saved


def migrate() -> None:
    done = subprocess.run(
        [sys.executable, str(MANAGE), "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def database_now() -> dt.datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        now: dt.datetime = cursor.fetchone()[0]
        return now


def listening() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%'")
        count: int = cursor.fetchone()[0]
        return count


def succeeded(ids: list[int]) -> int:
    return Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED).count()


def all_succeeded_moving_retries(ids: list[int]) -> bool:
    """True when every job succeeded; meanwhile a retry (an attempt that met the outage) is
    made due now instead of waiting for its backoff."""
    Job.objects.filter(pk__in=ids, status=Status.FAILED).update(run_at=shifted(-1))
    return succeeded(ids) == len(ids)


def test_primary_killed_and_standby_promoted_workers_resume_and_no_job_is_lost(
    pair: Pair,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
    django_db_blocker: Any,
) -> None:
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", SETTINGS)
    monkeypatch.setenv("LEASEJOBS_FAILOVER_PORTS", pair.ports)
    migrate()
    with on_the_pair(pair, django_db_blocker):
        ids = [j.pk for j in jobs.sleep.enqueue_many([((0.1,), {"label": "before"})] * 300)]
        workers = [spawn("--concurrency", "2", *FAST, name=name) for name in ("a", "b")]
        servers = f"127.0.0.1:{pair.primary.port},127.0.0.1:{pair.standby.port}"
        for worker in workers:
            wait_started(worker)
            assert f"leasejobs on {servers})" in worker.log()  # the banner names both
        wait_for(lambda: succeeded(ids) >= 60, what="work under way")
        # Acknowledged one by one up to the kill (each commit waited for the standby), async
        # handlers among them, so that both kinds are in flight at the kill.
        for _ in range(10):
            ids.append(jobs.sleep.enqueue(0.1, label="acked").pk)
            ids.append(jobs.async_sleep.enqueue(0.5, label="acked-async").pk)
        in_flight = Job.objects.filter(status=Status.RUNNING).count()
        connection.close()

        pair.primary.kill()
        # A failover slower than the workers' backoff: promoted once they try every 5 s.
        for worker in workers:
            wait_for(lambda w=worker: "retry_in=5.00" in w.log(), what="the backoff at its cap")
        pair.standby.run("pg_ctl", "-D", str(pair.standby.data), "-w", "promote")
        promoted = time.monotonic()
        promoted_at = database_now()  # the new primary's clock: finished_at is written by it
        # The leases taken before the kill have run out (moved, not waited for, as they would
        # through a failover longer than their 2 s). Each job is then finished by its worker,
        # whose heartbeat came first, or reclaimed by recovery and its old token refused.
        expired = Job.objects.filter(status=Status.RUNNING).update(lease_expires_at=shifted(-1))

        # Each worker finishes a job on the new primary, the same process as before the kill.
        after = Job.objects.filter(finished_at__gt=promoted_at)
        resumed_in = []
        for worker in workers:
            own = after.filter(finished_by=worker.worker_id)
            wait_for(own.exists, timeout=RESUME_WITHIN + 15, what="a job finished after promotion")
            first = own.aggregate(first=Min("finished_at"))["first"]
            resumed_in.append((first - promoted_at).total_seconds())
            assert worker.alive(), worker.log()
        assert max(resumed_in) < RESUME_WITHIN, resumed_in
        # Each worker's LISTEN connection is open on the new primary too.
        wait_for(lambda: listening() == len(workers), what="both listeners back")

        # Enqueued through the same multi-host settings: they reach the new primary and run.
        later = [j.pk for j in jobs.sleep.enqueue_many([((0.01,), {"label": "after"})] * 5)]
        wait_for(
            lambda: all_succeeded_moving_retries(ids + later),
            timeout=60,
            what="every job succeeded",
        )
        drained_in = time.monotonic() - promoted

        rows = check_invariants(ids + later, expected_count=len(ids) + len(later))
        assert {row.status for row in rows} == {Status.SUCCEEDED}
        assert DeadLetter.objects.count() == 0
        for worker in workers:
            assert worker.alive(), worker.log()  # the same processes, never restarted
            assert "worker.database_error" in worker.log()  # it did meet the outage
            assert "notify.listen_restored" in worker.log()  # LISTEN failed, then came back
            # No thread died, and none logged an error it did not expect.
            assert "Exception in thread" not in worker.log(), worker.log()
            assert "Traceback" not in worker.log(), worker.log()
        for worker in workers:
            worker.send(signal.SIGTERM)
            assert worker.wait() == 0, worker.log()
        reclaimed = sum(1 for row in rows if any(e["kind"] == "lease expired" for e in row.errors))
        refused = sum(int(n) for w in workers for n in re.findall(r" stale=(\d+)", w.log()))
        print(
            f"\nfailover: {len(ids)} jobs acknowledged before the kill, 0 lost, 0 dead; "
            f"{in_flight} in flight at the kill, {expired} leases expired at the promotion, "
            f"{reclaimed} reclaimed, {refused} stale writes refused; each worker finished a job "
            f"{max(resumed_in):.2f} s after the promotion, all done in {drained_in:.2f} s"
        )
