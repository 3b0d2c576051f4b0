"""Runtime counts added to the per-hour rows: flushes add up, racing workers lose nothing."""

from __future__ import annotations

import datetime as dt

import pytest
from testapp import jobs

from django_leasejobs import protocol, upkeep
from django_leasejobs.core import histogram
from django_leasejobs.models import RuntimeStat, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.upkeep import RuntimeCounts

from ..conftest import race, shifted


def counts(*runtimes: float, stale: int = 0, recovered: int = 0, lease: float = 60.0):
    entry = RuntimeCounts(stale=stale, recovered=recovered, lease_seconds=lease)
    for seconds in runtimes:
        entry.run(seconds)
    return entry


@pytest.mark.django_db
def test_two_flushes_of_one_hour_add_their_counts() -> None:
    upkeep.record_runtimes({"a.job": counts(1.0, 2.0, stale=1)}, heartbeat=15.0)
    upkeep.record_runtimes({"a.job": counts(30.0, recovered=2, lease=90.0)}, heartbeat=10.0)
    row = RuntimeStat.objects.get(name="a.job")
    assert (row.runs, row.seconds, row.max_seconds) == (3, 33.0, 30.0)
    assert (row.stale, row.recovered) == (1, 2)
    assert (row.lease_seconds, row.heartbeat_seconds) == (90.0, 10.0)
    assert row.histogram() == histogram.counts([1.0, 2.0, 30.0])
    assert row.hour.minute == row.hour.second == row.hour.microsecond == 0


@pytest.mark.django_db
def test_a_new_hour_starts_a_new_row() -> None:
    upkeep.record_runtimes({"a.job": counts(1.0)}, heartbeat=15.0)
    RuntimeStat.objects.update(hour=shifted(-3600))  # that flush was an hour ago
    upkeep.record_runtimes({"a.job": counts(2.0)}, heartbeat=15.0)
    assert sorted(RuntimeStat.objects.values_list("runs", flat=True)) == [1, 1]


@pytest.mark.django_db
def test_nothing_to_flush_writes_nothing() -> None:
    upkeep.record_runtimes({}, heartbeat=15.0)
    assert not RuntimeStat.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_racing_workers_add_every_count_once() -> None:
    def flush(seconds: float):
        return lambda: upkeep.record_runtimes(
            {"raced": counts(seconds, seconds), "other": counts(seconds)}, heartbeat=15.0
        )

    race(*(flush(float(i + 1)) for i in range(6)))
    raced = RuntimeStat.objects.get(name="raced")
    assert raced.runs == 12
    assert raced.seconds == 2 * sum(range(1, 7))
    assert raced.max_seconds == 6.0
    assert raced.histogram() == histogram.counts([float(i + 1) for i in range(6)] * 2)
    assert RuntimeStat.objects.get(name="other").runs == 6


@pytest.mark.django_db
def test_pruning_deletes_only_old_hours() -> None:
    upkeep.record_runtimes({"old": counts(1.0), "new": counts(1.0)}, heartbeat=15.0)
    RuntimeStat.objects.filter(name="old").update(hour=shifted(-10 * 86400))
    week = dt.timedelta(days=7)
    assert upkeep.prune_runtime_stats(week, dry_run=True) == 1
    assert RuntimeStat.objects.count() == 2
    assert upkeep.prune_runtime_stats(week) == 1
    assert list(RuntimeStat.objects.values_list("name", flat=True)) == ["new"]


@pytest.mark.django_db
def test_lease_recovery_names_the_jobs_it_took_back(expire_lease) -> None:
    job = jobs.record.enqueue("crashed")
    (claimed,) = protocol.claim("crashed-worker", batch=1)
    expire_lease(claimed)
    recovered = protocol.recover_expired()
    assert recovered == {job.pk: Outcome.RETRIED}
    assert recovered.names == {job.pk: "testapp.jobs.record"}
    assert job.__class__.objects.get(pk=job.pk).status == Status.FAILED
