"""Claimed rows become the same ``Job`` instances a queryset would build, only cheaper."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import connection
from django.db.models import JSONField
from django.db.models.signals import post_init
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


def _loaded_state(job: Job) -> dict[str, object]:
    """What makes two loaded instances the same: field values by name, and their state."""
    values = {k: v for k, v in vars(job).items() if k != "_state"}
    return {**values, "_state": (job._state.db, job._state.adding)}


@pytest.mark.django_db
def test_built_instances_hold_exactly_what_from_db_sets() -> None:
    """job_rows.instances fills __dict__ directly: the same keys and values from_db would set."""
    job = jobs.add.enqueue(1, 2, priority=3)
    (claimed,) = lifecycle.claim("w1", batch=1)
    deferred = claimed.get_deferred_fields()
    loaded = Job.objects.defer(*deferred).get(pk=job.pk) if deferred else Job.objects.get(pk=job.pk)
    assert _loaded_state(claimed) == _loaded_state(loaded)
    (made,) = jobs.add.enqueue_many([((3, 4), {})])
    assert _loaded_state(made) == _loaded_state(Job.objects.get(pk=made.pk))


@pytest.mark.django_db
def test_init_signal_receivers_see_every_instance() -> None:
    """A post_init receiver (a field tracker, say) sees claimed and enqueued jobs, as Django's."""
    seen: list[Job] = []

    def receiver(sender: type[Job], instance: Job, **kwargs: object) -> None:
        seen.append(instance)

    post_init.connect(receiver, sender=Job)
    try:
        made = jobs.add.enqueue_many([((1, 2), {}), ((3, 4), {})])
        single = jobs.add.enqueue(5, 6)
        claimed = lifecycle.claim("w1", batch=3)
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert [(job.status, job.attempt) for job in claimed] == [("running", 1)] * 3
    for job in [*made, single, *claimed]:
        assert any(instance is job for instance in seen)
        stored = Job.objects.get(pk=job.pk)
        assert job.args == stored.args
        assert job._state.db == stored._state.db
        assert job._state.adding is False
