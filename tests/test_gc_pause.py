"""A bulk enqueue pauses the cyclic garbage collector and always gives it back as it was."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest
from testapp import jobs

from django_leasejobs import gc_pause
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.django_db
@pytest.mark.usefixtures("collector_on")
class TestEnqueueMany:
    def test_paused_during_the_call_and_resumed_after(self) -> None:
        seen: list[bool] = []

        def items() -> Iterator[tuple[tuple[int, int], dict[str, int]]]:
            for i in range(3):
                seen.append(gc.isenabled())
                yield (i, i), {}

        assert len(jobs.add.enqueue_many(items())) == 3
        assert seen == [False, False, False]
        assert gc.isenabled()

    def test_resumed_when_an_item_is_refused(self) -> None:
        with pytest.raises(JobValidationError):
            jobs.add.enqueue_many([((1, 2), {}), ((float("nan"), 1), {})])
        assert gc.isenabled()
        assert not Job.objects.exists()

    def test_a_collector_that_was_off_stays_off(self) -> None:
        gc.disable()
        jobs.noop.enqueue_many([((), {})])
        assert not gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_overlapping_pauses_resume_when_the_last_one_leaves() -> None:
    """Two threads' bulk enqueues overlap: the first to leave must not resume it early."""
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_pause.paused():
            entered.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    with gc_pause.paused():
        thread.start()
        assert entered.wait(5)
    assert not gc.isenabled(), "the other thread is still inside"
    release.set()
    thread.join(5)
    assert gc.isenabled()
