"""``runjobworker --reload``: restart the worker when project code changes, as ``runserver`` does.

Django's own autoreloader (``django.utils.autoreload.run_with_reloader``) runs the command
again in a child process and, there, runs the worker on a thread while the main thread watches
the project's files. When one changes, Django ends the child (exit status 3) and starts a new
one, which loads the new code. On its way out the child stops the worker with no grace: it
stops claiming and releases its in-flight jobs at once, unspent (the graceful shutdown's
release), so the new process runs them again with the new code; nothing waits for a lease to
expire. Ctrl-C and SIGTERM to the child end it the same way.

The outer process ignores SIGINT: Ctrl-C reaches the whole terminal's process group, and the
outer process would otherwise kill the child a quarter of a second later, before its release.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, OutputWrapper
from django.utils import autoreload

from django_leasejobs.runtime.worker import Worker

STOP_WAIT = 30.0
"""Longest wait, in the child, for the worker to release its jobs and stop before it exits."""


def in_child() -> bool:
    """True in the process that runs the worker (Django sets ``RUN_MAIN`` for it)."""
    return os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true"


def run(worker: Worker, run_worker: Callable[[], None], stderr: OutputWrapper) -> None:
    """Run ``run_worker`` (banner, ``worker.run()``, summary) under Django's autoreloader.

    In the outer process this only restarts the child until it exits for a reason other than a
    code change, then exits with its status. In the child it returns (or raises ``SystemExit``)
    once the worker has released its jobs and stopped.
    """
    if not in_child():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child stops on it; we wait for it
        autoreload.run_with_reloader(_nothing)  # exits with the last child's status
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)  # inherited ignored: undo it
    changed: list[str] = []
    stopping = threading.Event()
    stopped = threading.Event()

    def on_change(sender: Any, file_path: Any, **kwargs: Any) -> None:
        changed.append(str(file_path))  # returns None: Django goes on with the restart

    def worker_thread() -> None:
        code = 0
        try:
            run_worker()
        except CommandError as exc:  # what the command would have printed and exited with
            stderr.write(f"CommandError: {exc}")
            code = exc.returncode
        except BaseException:
            stopped.set()
            raise  # printed by Django's check_errors; the reloader waits for a fix
        stopped.set()
        if not stopping.is_set():
            # The worker ended on its own (--max-jobs, --max-stuck, an error): so does the
            # process, with the command's status, as runserver does when its server fails.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    autoreload.file_changed.connect(on_change, weak=False)
    try:
        autoreload.run_with_reloader(worker_thread)
    finally:
        stopping.set()
        reason = f"code changed: {changed[-1]}" if changed else "reloader stopped"
        worker.stop(reason, grace=0)
        stopped.wait(STOP_WAIT)
        autoreload.file_changed.disconnect(on_change)


def _nothing() -> None:
    """The outer process never runs the worker: ``run_with_reloader`` only restarts the child."""
