"""``fn.aenqueue`` and ``fn.aenqueue_many`` from async code, on a real database.

As Django's ``Task.aenqueue``: the sync enqueue runs through ``sync_to_async`` with
``thread_sensitive=True``. From an event loop it commits at once (autocommit); called from
async code that sync code is running (``async_to_sync``), it joins that thread's transaction.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connection, connections, transaction
from testapp import jobs

from django_leasejobs import JobValidationError
from django_leasejobs.models import Job


@pytest.fixture
async def closes_its_connections() -> AsyncIterator[None]:
    """The connections of the thread ``sync_to_async`` ran in, closed afterwards, so the test
    database can be dropped (an event loop's thread-sensitive thread outlives the test)."""
    yield
    await sync_to_async(connections.close_all)()


def committed_names() -> list[str]:
    """The job names another connection sees: only what was committed."""
    seen: list[str] = []

    def read() -> None:
        try:
            seen.extend(Job.objects.order_by("pk").values_list("name", flat=True))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    return seen


@pytest.mark.anyio
@pytest.mark.usefixtures("closes_its_connections")
@pytest.mark.django_db(transaction=True)
async def test_aenqueue_from_an_async_function_commits_the_job() -> None:
    with pytest.raises(SynchronousOnlyOperation):
        jobs.add.enqueue(1, 2)  # the sync call is refused on an event loop, as Django's ORM is
    job = await jobs.add.aenqueue(1, b=2)
    assert (job.args, job.kwargs) == ([1], {"b": 2})
    configured = await jobs.add.using(priority=4).aenqueue(3, 4)
    assert configured.priority == 4
    many = await jobs.add.using(queue="other").aenqueue_many([((5, 6), {}), {"args": [7, 8]}])
    assert [job.queue for job in many] == ["other", "other"]
    names = await sync_to_async(committed_names)()
    assert names == ["testapp.jobs.add"] * 4


@pytest.mark.anyio
@pytest.mark.usefixtures("closes_its_connections")
@pytest.mark.django_db(transaction=True)
async def test_aenqueue_refuses_bad_input_and_writes_nothing() -> None:
    with pytest.raises(TypeError, match="cannot take these arguments: missing a required"):
        await jobs.add.aenqueue(1)
    with pytest.raises(JobValidationError, match="priority must be an integer"):
        await jobs.add.aenqueue(1, 2, priority="high")
    with pytest.raises(TypeError, match=r"item 1: Job 'testapp\.jobs\.add' cannot take"):
        await jobs.add.aenqueue_many([((1, 2), {}), ((1, 2, 3), {})])
    assert await Job.objects.acount() == 0


@pytest.mark.anyio
@pytest.mark.usefixtures("closes_its_connections")
@pytest.mark.django_db(transaction=True)
async def test_a_transaction_of_your_own_wraps_the_sync_enqueue() -> None:
    """In async code, a transaction is a sync function's: enqueue inside it, rolled back whole."""

    def place_order() -> None:
        with transaction.atomic():
            jobs.add.enqueue(1, 2)
            raise RuntimeError("payment refused")

    with pytest.raises(RuntimeError):
        await sync_to_async(place_order)()
    assert await Job.objects.acount() == 0


@pytest.mark.django_db(transaction=True)
def test_aenqueue_under_async_to_sync_joins_the_callers_transaction() -> None:
    """thread_sensitive: the enqueue runs on the calling sync thread, in its atomic block."""
    with pytest.raises(RuntimeError), transaction.atomic():
        async_to_sync(jobs.add.aenqueue)(1, 2)
        assert Job.objects.count() == 1  # the same connection sees it
        raise RuntimeError("roll back")
    assert Job.objects.count() == 0
    async_to_sync(jobs.add.aenqueue_many)([((1, 2), {})])
    assert committed_names() == ["testapp.jobs.add"]
