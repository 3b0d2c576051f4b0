"""The table of live workers: the heartbeat's upsert, a clean stop's delete, pruning by age."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_leasejobs import upkeep
from django_leasejobs.models import Worker

from ..conftest import shifted, worker_row

pytestmark = pytest.mark.django_db


def beat(worker_id: str = "w1", **changes: object) -> None:
    worker_row(worker_id, **changes)


def move_back(worker_id: str, seconds: float) -> None:
    """As if the row had been written ``seconds`` ago (time moves by moving rows)."""
    Worker.objects.filter(worker_id=worker_id).update(
        started_at=shifted(-seconds), last_seen_at=shifted(-seconds)
    )


def test_a_first_beat_inserts_the_row_at_database_time() -> None:
    beat()
    row = Worker.objects.get(worker_id="w1")
    assert (row.host, row.pid, row.queues, row.version) == ("host-a", 4321, "default,mail", "1.2.3")
    assert (row.concurrency, row.async_concurrency, row.running, row.stuck) == (4, 100, 2, 0)
    assert row.lease_seconds == 60.0
    assert row.started_at == row.last_seen_at


def test_a_later_beat_updates_the_numbers_and_last_seen_but_keeps_started_at() -> None:
    beat()
    move_back("w1", 3600)
    before = Worker.objects.get(worker_id="w1")
    beat(running=0, stuck=3)
    after = Worker.objects.get(worker_id="w1")
    assert Worker.objects.count() == 1
    assert (after.running, after.stuck) == (0, 3)
    assert after.started_at == before.started_at
    assert after.last_seen_at - before.last_seen_at > dt.timedelta(minutes=59)


def test_a_beat_is_one_statement() -> None:
    beat()
    for changes in ({}, {"stuck": 1}):  # the insert, then the update of the same row
        with CaptureQueriesContext(connection) as queries:
            beat(**changes)
        assert len(queries) == 1, [q["sql"] for q in queries]


def test_values_are_parameters_and_long_text_is_cut_to_the_column() -> None:
    odd = "w'); DROP TABLE x; -- %s %%"
    beat(odd, queues=",".join(f"queue-{i}" for i in range(500)))
    row = Worker.objects.get(worker_id=odd)
    assert len(row.queues) == 2000
    assert row.queues.startswith("queue-0,queue-1,")
    assert row.queues.endswith("\u2026")


def test_forget_worker_deletes_its_row_only() -> None:
    beat("w1")
    beat("w2")
    assert upkeep.forget_worker("w1") is True
    assert upkeep.forget_worker("w1") is False
    assert list(Worker.objects.values_list("worker_id", flat=True)) == ["w2"]


def test_prune_deletes_rows_not_seen_for_the_given_age_only() -> None:
    for worker_id, age in (("fresh", 0), ("recent", 60), ("old", 3600)):
        beat(worker_id)
        move_back(worker_id, age)
    assert upkeep.count_lost_workers(dt.timedelta(minutes=10)) == 1
    assert upkeep.prune_workers(dt.timedelta(minutes=10)) == 1
    assert sorted(Worker.objects.values_list("worker_id", flat=True)) == ["fresh", "recent"]
    assert upkeep.prune_workers(dt.timedelta(seconds=30)) == 1
    assert list(Worker.objects.values_list("worker_id", flat=True)) == ["fresh"]


@pytest.mark.parametrize("age", [dt.timedelta(0), dt.timedelta(seconds=-1), 60])
def test_prune_refuses_an_age_that_is_not_positive(age) -> None:
    with pytest.raises(ValueError, match="positive timedelta"):
        upkeep.prune_workers(age)
