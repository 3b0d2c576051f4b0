"""Exceptions users see. Each one says what was wrong and what was kept (nothing half-written)."""

from __future__ import annotations


class LeaseJobsError(Exception):
    """Base class of every error this app raises on purpose."""


class JobValidationError(LeaseJobsError, ValueError):
    """Enqueue input was refused before anything was written."""


class JobArgumentsError(JobValidationError, TypeError):
    """The arguments do not fit the handler's signature (missing, unexpected, too many).

    A ``TypeError``, as calling the function with them would be, and a ``JobValidationError``:
    raised at enqueue, before anything was written, rather than by every attempt of the job.
    ``field`` says which of ``args`` and ``kwargs`` is at fault, for a form or an HTTP error.
    """

    def __init__(self, message: str, *, field: str = "args") -> None:
        super().__init__(message)
        self.field = field


class WorkflowError(JobValidationError):
    """A workflow that cannot be enqueued or changed as asked: a cycle, an ``after`` naming no
    step, a name used twice, a policy that does not exist (docs/workflows.md)."""


class UnknownJobError(JobValidationError):
    """A job name that is not registered with ``@job``.

    The message says what to do; ``problem`` says why a worker could not find the job (empty
    when nothing was tried) and ``advice`` what to do, for callers that word their own line.
    """

    def __init__(self, message: str, *, problem: str = "", advice: str = "") -> None:
        super().__init__(message)
        self.problem = problem
        self.advice = advice


class PermanentError(LeaseJobsError):
    """Raise from a handler to dead-letter the job now, without further retries."""


class JobFailedError(LeaseJobsError):
    """A job did not succeed: it ended ``dead`` or ``cancelled`` (``job.wait()``,
    ``await job.await_result()``), or a job run in eager mode (``LEASEJOBS_EAGER``) failed: its
    message says what became of the job (its retry waits, or it is dead), and the handler's own
    error is its ``__cause__``.

    ``job_id``, ``name`` and ``status`` say which job and how it ended; ``error`` is its last
    error text ("" for a job cancelled before it ran); ``replayed_by`` is the id of the job an
    operator's replay of this dead job created (``None`` when it was not replayed).
    """

    def __init__(
        self,
        message: str,
        *,
        job_id: int | None = None,
        name: str = "",
        status: str = "",
        error: str = "",
        replayed_by: int | None = None,
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.name = name
        self.status = status
        self.error = error
        self.replayed_by = replayed_by


class StaleAttemptError(LeaseJobsError):
    """A write guarded by an attempt token changed no row: the lease was lost.

    Raised only inside a handler (``ctx.complete()``) so that the handler's own transaction rolls
    back; the worker loop never sees it as an exception, it sees a ``STALE`` outcome.
    """


class InvalidTransitionError(LeaseJobsError):
    """An operator action (cancel, run now, replay) that the job's current state does not allow."""


class ScheduleError(LeaseJobsError, ValueError):
    """A schedule (in ``LEASEJOBS_SCHEDULES`` or the admin) that cannot be used.

    The message names the schedule and each problem; nothing was written.
    """


class LeaseExpiredError(LeaseJobsError):
    """An attempt's lease expired before it reported (its worker died or stalled).

    Never raised: it names the error class of such attempts in a ``django.tasks`` result.
    """


class TaskRefusedError(LeaseJobsError):
    """A row marked as a ``django.tasks`` task whose path does not resolve to a ``Task``.

    ``advice`` (also at the end of the message) says what to do.
    """

    def __init__(self, message: str, *, advice: str = "") -> None:
        super().__init__(message)
        self.advice = advice


class TaskNotImportedError(TaskRefusedError):
    """A task path this worker may import but cannot (its module is not in this release): the
    job waits for a worker that can (``LEASEJOBS_UNKNOWN_JOB_GRACE``), rather than dying."""
