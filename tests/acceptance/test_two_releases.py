"""Proof of a rolling deploy: two releases of a project share one database, through real processes.

Release 1 and release 2 of the shop (:mod:`.releases`) run side by side on the test database:

1. release 1's workers run; release 1's web processes and release 2's (deployed first) enqueue
   at the same time. The old workers run what they know and defer the rest: the new job, the
   renamed one (its new name) and the changed one (its version 2);
2. release 2's workers start; release 1's workers stop (SIGTERM); release 1's web processes,
   still up, enqueue once more (the old name, version 1);
3. everything ends: no dead letter, every job succeeded, every payload handled exactly once by
   a handler that received the arguments of its own signature (release 1's handlers never
   release 2's arguments), and the deferred jobs started within 5 s of the start of the first
   release 2 worker, on the database clock from its row's ``started_at`` (the bound of the
   deploys issue; printed, with the figure from its command's start, its project loaded).

The same run again with the release 2 worker holding a blocked job killed with ``kill -9``: the
job's lease expiry is moved into the past and the other release 2 worker runs it, once.
Deferral delays are cut to nothing by moving ``run_at`` in the database, never by sleeping.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import F

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import FINAL, DeadLetter, Job, Status
from django_leasejobs.models import Worker as WorkerRow

from ..conftest import shifted
from ..invariants import check_invariants, wait_for
from .releases import (
    Release,
    Worker,
    expected_calls,
    go,
    payload_ids,
    read_calls,
    write_release,
)

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

ROUNDS = 8
"""Rounds each producer enqueues (one job of each of its release's jobs a round)."""
START_BOUND = 5.0
"""Seconds within which a deferred job starts once a worker that knows it starts (the issue's)."""
HELD = "b-0-ship"
"""The payload whose ``ship`` blocks, in the ``kill -9`` run, until its gate is removed."""
WORKER = ("--concurrency", "4", "--heartbeat", "1")
"""A beat a second: the worker's row (which the test waits for) is written a second after start."""
NEW_ONLY = ("alert", "charge", "ship")
"""What release 2's producer enqueues that release 1's workers must not run (new name, new
version, new job); its ``greet`` is unchanged and runs anywhere."""


@pytest.fixture
def releases(tmp_path: Path) -> Iterator[tuple[Release, Release]]:
    one, two = write_release(tmp_path, 1), write_release(tmp_path, 2)
    yield one, two
    one.kill_all()
    two.kill_all()


def jobs_by_payload() -> dict[str, Job]:
    return {job.args[0]: job for job in Job.objects.order_by("pk")}


def started(worker: Worker) -> None:
    """Wait for the worker's row (its first heartbeat beat, a beat after its start)."""
    row = WorkerRow.objects.filter(worker_id=worker.worker_id)
    wait_for(lambda: row.exists() or not worker.alive(), what="start")
    assert worker.alive(), worker.log()


def finished(payloads: list[str]) -> bool:
    jobs = jobs_by_payload()
    return all(pid in jobs and jobs[pid].status in FINAL for pid in payloads)


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill-9"])
def test_two_releases_on_one_database(releases: tuple[Release, Release], crash: bool) -> None:
    one, two = releases
    gate = one.shared / "gates" / HELD
    if crash:
        gate.touch()
    # Every process starts now (loading a project takes seconds); each waits for its moment.
    # Web processes: release 1's (a: before its workers stop, c: after) and release 2's (b).
    web = {1: one.producer(ROUNDS, "a", "c"), 2: two.producer(ROUNDS, "b")}
    old = [one.worker(f"w{n}", *WORKER) for n in (1, 2)]
    for worker in old:
        started(worker)

    # 1. Release 1's workers run while both releases' web processes enqueue.
    go(one.shared, "a")
    go(one.shared, "b")
    wait_for(lambda: web[1].produced("a") and web[2].produced("b"), what="the producers")
    from_one, from_two = payload_ids("a", ROUNDS, 1), payload_ids("b", ROUNDS, 2)
    new_only = [pid for pid in from_two if pid.endswith(NEW_ONLY)]
    runnable = [pid for pid in from_one + from_two if pid not in new_only]

    def old_workers_done() -> bool:
        jobs = jobs_by_payload()
        ran = all(pid in jobs and jobs[pid].status == Status.SUCCEEDED for pid in runnable)
        waiting = all(
            pid in jobs and jobs[pid].status == Status.PENDING and jobs[pid].deferrals >= 1
            for pid in new_only
        )
        return ran and waiting

    wait_for(old_workers_done, what="release 1 workers to run theirs and defer the rest")
    # Deferral delays grow (5 s, 10 s, ...): an hour ahead, only a wake-up can make them due.
    waiting = Job.objects.filter(status=Status.PENDING, run_at=F("deferred_until"))
    ahead = Job.objects.filter(pk__in=list(waiting.values_list("pk", flat=True)))
    ahead.update(run_at=shifted(3600))
    ahead.update(deferred_until=F("run_at"))

    # 2. Release 2's workers start; release 1's stop; release 1's web processes enqueue again.
    spawned = db_now()
    new = [two.worker(f"w{n}", *WORKER) for n in (1, 2)]
    rows = WorkerRow.objects.filter(worker_id__in=[worker.worker_id for worker in new])
    wait_for(rows.exists, what="a release 2 worker")
    for worker in old:  # one new worker is up: the old ones stop
        worker.process.send_signal(signal.SIGTERM)
    for worker in new:
        started(worker)
    for worker in old:
        assert worker.process.wait(timeout=60) == 0, worker.log()
    # The first release 2 worker's start, as its row dates it (the first heartbeat, one beat
    # after its loop starts); and, earlier, when its command started (its project loaded).
    registered = min(rows.values_list("started_at", flat=True))
    command = min(at for at in (worker.started_at() for worker in new) if at is not None)
    go(one.shared, "c")
    assert web[1].process.wait(timeout=120) == web[2].process.wait(timeout=120) == 0
    late = payload_ids("c", ROUNDS, 1)
    everything = from_one + from_two + late

    if crash:
        # A release 2 worker holds the gated job mid-job, all else done: kill it with -9.
        wait_for(lambda: finished([p for p in everything if p != HELD]), what="all but one")
        wait_for(gate.with_suffix(".held").exists, what="the gated job to start")
    else:
        wait_for(lambda: finished(everything), what="every job to finish")
    jobs = jobs_by_payload()
    delays = sorted((jobs[pid].started_at - registered).total_seconds() for pid in new_only)
    from_command = max((jobs[pid].started_at - command).total_seconds() for pid in new_only)
    boot = (command - spawned).total_seconds()
    print(
        f"\n{connection.vendor} ({'kill -9' if crash else 'sigterm'} run), database clock: "
        f"{len(delays)} deferred jobs started {delays[0]:.3f} s to {delays[-1]:.3f} s after the "
        f"first release 2 worker registered; at most {from_command:.3f} s after its command "
        f"started (its project loaded, {boot:.3f} s after the process was spawned)"
    )
    assert delays[-1] <= START_BOUND, delays

    if crash:
        holder = next(w for w in new if w.worker_id == jobs[HELD].lease_owner)
        os.kill(holder.process.pid, signal.SIGKILL)
        assert holder.process.wait(timeout=30) == -signal.SIGKILL
        gate.unlink()
        Job.objects.filter(pk=jobs[HELD].pk).update(lease_expires_at=shifted(-1))
        assert any(w.alive() for w in new)
        wait_for(lambda: finished(everything), what="the killed worker's job to run again")

    # 3. Every job ran once, on a handler that took its own arguments; nothing died.
    assert not DeadLetter.objects.exists()
    rows = check_invariants(expected_count=len(everything))
    assert {job.status for job in rows} == {Status.SUCCEEDED}
    assert {job.args[0] for job in rows} == set(everything)
    calls = read_calls(one.shared)
    assert Counter(call["pid"] for call in calls) == Counter(everything)  # each exactly once
    for call in calls:
        producer = 2 if call["pid"] in from_two else 1
        allowed = expected_calls(call["pid"], producer)
        assert (call["release"], call["job"]) in allowed, call
        assert call["given"] == allowed[call["release"], call["job"]], call
    ran = {(c["release"], c["job"], c["pid"].split("-")[0]) for c in calls}
    # Not a vacuous pass: each path of the deploy was taken.
    assert (1, "charge", "a") in ran  # version 1 on release 1
    assert (2, "charge", "c") in ran  # version 1 upgraded on release 2
    assert (2, "alert", "c") in ran  # the old name, through the alias
    assert all(jobs[pid].deferrals >= 1 for pid in new_only)  # release 1 deferred them
    if crash:
        held = Job.objects.get(pk=jobs[HELD].pk)
        assert held.attempt - held.released == 2  # the killed attempt, then the one that ran
