"""Pause Python's cyclic garbage collector while a bulk enqueue builds its jobs.

A bulk enqueue keeps every object it makes (ten or so per job: the row, its arguments, the
``Job`` and its state), so the collector's young generations fill and promote them, and about
every quarter of the heap's size in new survivors CPython runs a full collection over the whole
process: in a Django process, hundreds of thousands of objects. Measured on 20,000 no-op jobs:
18.5 µs of CPU per job with the collector running, 11.7 µs with it paused; nothing a bulk
enqueue creates forms a reference cycle, so pausing it frees nothing later than it would have.

The collector is process-wide, so the pause is kept short and never extended: the caller holds
it only while it reads the items, validates rows and builds jobs (not while it sends signals or
waits on another transaction's dedupe key); only the first holder pauses, and the collector
resumes when that one leaves even if another thread's bulk enqueue is still running (the
garbage that piled up meanwhile is collected at the next allocation). A collector that was off
stays off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_held = False


@contextmanager
def paused() -> Iterator[None]:
    global _held
    with _lock:
        mine = not _held and gc.isenabled()
        if mine:
            gc.disable()
            _held = True
    try:
        yield
    finally:
        if mine:
            with _lock:
                _held = False
                gc.enable()
