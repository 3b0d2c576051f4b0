"""The worker's threads start in the context of the code that starts them.

A worker serving one queue database of several (``runjobworker --database``) says so in a
``ContextVar`` (``models.databases.using_database``); a plain ``threading.Thread`` would start
with an empty context and work on the home database instead. Every thread of the worker (its
pool, heartbeat, listener, watchdog, event loop and writers) starts here.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any


def start(target: Callable[..., object], *args: Any, name: str) -> threading.Thread:
    """Start a daemon thread running ``target(*args)`` in a copy of the caller's context."""
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target, *args), name=name, daemon=True)
    thread.start()
    return thread
