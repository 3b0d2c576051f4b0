"""A row's arguments at its handler's version, before the handler is called.

A row stores the ``@job(version=)`` it was enqueued at. Three cases, decided before the call
(and before anything binds the arguments to the handler's signature):

* the same version: the stored arguments, as they are;
* an older row: the ``@job(upgrade=)`` chain brings them up; the success write stores the
  result (``protocol.Upgraded``). An upgrader that raises, returns something other than
  ``(args, kwargs)``, or is missing ends the attempt as a permanent error of kind
  ``upgrade failed``: dead-lettered with the arguments as enqueued, for a replay once fixed;
* a newer row (enqueued by a later release): this worker must never call its older handler
  with them, so the attempt is handed back uncharged, as for a name it does not know
  (``protocol.defer``), for a worker of that release.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

from ..core import registry, versions
from ..protocol import UNREGISTERED_JOB, Failure, Upgraded

if TYPE_CHECKING:
    from .execution import Execution

NEWER_ADVICE = (
    "Deploy workers whose code has this job at that version (they run it at once), or "
    "replay it once they run."
)


def prepared(
    execution: Execution, job_function: registry.JobSpec
) -> tuple[list[Any], dict[str, Any]] | None:
    """The arguments to call the handler with (its context not included); None when it must
    not be called, with why recorded on ``execution`` (``write_result`` writes it)."""
    job = execution.job
    stored = job.version
    if stored == job_function.version:
        return job.args, job.kwargs
    if stored > job_function.version:
        newer(execution, job_function)
        return None
    try:
        args, kwargs = versions.upgrade(
            job_function.name,
            job_function.upgrade,
            job.args,
            job.kwargs,
            stored,
            job_function.version,
        )
    except BaseException as exc:  # SystemExit too: an upgrader ends the attempt, not the thread
        if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is (
            threading.main_thread()
        ):
            raise  # Ctrl-C stopping the process, as ``execution.interrupts_process`` says
        execution.exception = exc
        failure = Failure.from_exception(exc, kind=versions.UPGRADE_FAILED)
        if isinstance(exc, versions.UpgradeError):  # the upgrader's own refusal: no traceback
            failure = dataclasses.replace(failure, traceback="")
        execution.failure = failure
        execution.retryable = False
        return None
    execution.upgraded = execution.context.upgraded = Upgraded(job_function.version, args, kwargs)
    return args, kwargs


def newer(execution: Execution, job_function: registry.JobSpec) -> None:
    """The row's version is newer than the handler's: deferred, never called."""
    job = execution.job
    execution.unknown = (
        f"version {job.version} of {job.name!r} is newer than this worker's "
        f"version {job_function.version}"
    )
    execution.failure = Failure(
        f"Job {job.name!r} was enqueued at version {job.version}, newer than the version "
        f"{job_function.version} this worker's @job(version=) runs; it was not run. "
        f"{NEWER_ADVICE}",
        kind=UNREGISTERED_JOB,
        advice=NEWER_ADVICE,
    )
    execution.retryable = False
