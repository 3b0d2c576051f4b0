"""Claimed rows become the same ``Job`` instances a queryset would build, only cheaper."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import connection
from django.db.models import JSONField
from testapp import jobs

from django_leasejobs import lifecycle
from django_leasejobs.lazy_event import LazyEvent
from django_leasejobs.models import Job

NOT_CLAIMED = {"errors", "result", "last_error"}


def test_only_json_fields_need_a_converter() -> None:
    """job_rows converts JSON columns only: a new field with a converter must be added there."""
    converted = {f.name for f in Job._meta.concrete_fields if hasattr(f, "from_db_value")}
    assert converted == {f.name for f in Job._meta.concrete_fields if isinstance(f, JSONField)}


@pytest.mark.django_db
def test_a_claimed_job_equals_the_row_the_orm_loads() -> None:
    jobs.noop.enqueue(
        1,
        "é",
        {"deep": [None, True, 2.5]},
        key="välue",
        n=[1, 2],
        priority=5,
        dedupe_key="same-as-orm",
    )
    (claimed,) = lifecycle.claim("w1", batch=1)
    loaded = Job.objects.get(pk=claimed.pk)
    deferred = claimed.get_deferred_fields()
    if connection.vendor == "postgresql":
        assert deferred == NOT_CLAIMED
    for field in Job._meta.concrete_fields:
        if field.attname in deferred:
            continue
        mine, theirs = getattr(claimed, field.attname), getattr(loaded, field.attname)
        assert mine == theirs, field.name
        assert type(mine) is type(theirs), field.name
        if isinstance(mine, dt.datetime):
            assert mine.utcoffset() == dt.timedelta(0), field.name
    assert (claimed.args, claimed.kwargs) == (
        [1, "é", {"deep": [None, True, 2.5]}],
        {"key": "välue", "n": [1, 2]},
    )
    assert claimed._state.db == loaded._state.db
    assert claimed._state.adding is False
    # A column the claim leaves out is loaded on access, as a deferred field is.
    assert claimed.errors == []
    assert claimed.result is None
    assert claimed.last_error == ""


@pytest.mark.django_db
def test_a_claimed_job_saves_like_a_loaded_one() -> None:
    jobs.noop.enqueue(a=1)
    (claimed,) = lifecycle.claim("w1", batch=1)
    claimed.priority = 9
    claimed.save(update_fields=["priority"])
    row = Job.objects.get(pk=claimed.pk)
    assert (row.priority, row.kwargs, row.started_at) == (9, {"a": 1}, claimed.started_at)


class TestLazyEvent:
    def test_set_and_clear(self) -> None:
        event = LazyEvent()
        assert not event.is_set()
        event.set()
        assert event.is_set()
        assert event.wait(0)
        event.clear()
        assert not event.is_set()

    def test_wait_times_out_when_nobody_sets_it(self) -> None:
        assert LazyEvent().wait(0.01) is False

    def test_wait_wakes_when_another_thread_sets_it(self) -> None:
        event = LazyEvent()
        woke: list[bool] = []
        waiter = threading.Thread(target=lambda: woke.append(event.wait(10)))
        waiter.start()
        while event._event is None:  # the waiter has made its condition
            time.sleep(0.001)
        event.set()
        waiter.join(10)
        assert woke == [True]
