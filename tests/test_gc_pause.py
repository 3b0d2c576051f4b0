"""A bulk enqueue pauses the cyclic garbage collector and always gives it back as it was."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from testapp import jobs

from django_leasejobs import gc_pause, signals
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
    def test_paused_while_rows_are_validated_and_resumed_after(self) -> None:
        seen: list[bool] = []

        class Recording(Mapping[str, int]):
            """Empty kwargs that note the collector's state when validation reads them."""

            def __getitem__(self, key: str) -> int:
                raise KeyError(key)

            def __iter__(self) -> Iterator[str]:
                seen.append(gc.isenabled())
                return iter(())

            def __len__(self) -> int:
                return 0

        assert len(jobs.add.enqueue_many([((i, i), Recording()) for i in range(3)])) == 3
        assert seen == [False, False, False]
        assert gc.isenabled()

    def test_not_paused_while_signal_receivers_run(
        self, django_capture_on_commit_callbacks: Any
    ) -> None:
        seen: list[bool] = []

        def receiver(**kwargs: object) -> None:
            seen.append(gc.isenabled())

        signals.job_enqueued.connect(receiver)
        try:
            with django_capture_on_commit_callbacks(execute=True):
                jobs.noop.enqueue_many([((), {}), ((), {})])
        finally:
            signals.job_enqueued.disconnect(receiver)
        assert seen == [True, True]

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
def test_an_overlapping_pause_does_not_extend_the_first() -> None:
    """Bulk enqueues in several threads must not keep the collector off between them: it
    resumes when the thread that paused it leaves, whoever is still inside."""
    entered, release = threading.Event(), threading.Event()

    def first() -> None:
        with gc_pause.paused():
            entered.set()
            release.wait(5)

    thread = threading.Thread(target=first)
    thread.start()
    assert entered.wait(5)
    with gc_pause.paused():
        assert not gc.isenabled()
        release.set()
        thread.join(5)
        assert gc.isenabled(), "the first holder left: the collector runs again"
    assert gc.isenabled()
