"""Pause Python's cyclic garbage collector while a bulk enqueue builds its jobs.

A bulk enqueue keeps every object it makes (ten or so per job: the row, its arguments, the
``Job`` and its state), so the collector's young generations fill and promote them, and about
every quarter of the heap's size in new survivors CPython runs a full collection over the whole
process: in a Django process, hundreds of thousands of objects. Measured on 20,000 no-op jobs:
18.5 µs of CPU per job with the collector running, 11.7 µs with it paused; nothing a bulk
enqueue creates forms a reference cycle, so pausing it frees nothing later than it would have.

The collector is process-wide: while it is paused, other threads' garbage cycles wait too (for
the length of the call). Its previous state is restored on the way out, exception or not; a
collector that was already off stays off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_resume = False


@contextmanager
def paused() -> Iterator[None]:
    """Nested and concurrent uses keep it paused until the last one leaves."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()
