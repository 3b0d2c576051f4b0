"""A finished attempt is freed by reference counting, not left for the garbage collector.

The worker's slot holds its execution while the completion waits for a flush, and the
execution held a callback holding the slot: every grouped job became a reference cycle that
lived until a full collection (the worker's RSS grew by about 12 MiB under load).
"""

from __future__ import annotations

import functools
import weakref

from django_leasejobs.models import Job
from django_leasejobs.runtime import execution
from django_leasejobs.runtime.slots import Slot


def _noted(
    seen: list[float | None], slot: Slot, result: execution.Execution, timeout: float | None
) -> None:
    seen.append(timeout)


def test_a_started_attempt_and_its_slot_hold_no_cycle() -> None:
    job = Job(pk=1, name="testapp.jobs.noop", attempt=1, queue="default")
    seen: list[float | None] = []
    slot = Slot(job)
    result = execution.start(job, "w", on_start=functools.partial(_noted, seen, slot))
    slot.execution = slot.handled = result
    result.begin(5.0)
    assert seen == [5.0]
    result.begin(None)
    assert seen == [5.0], "the start callback runs once"
    freed = weakref.ref(job)
    del job, slot, result
    assert freed() is None, "the job outlived its slot and execution: a reference cycle holds it"
