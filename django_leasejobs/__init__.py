"""django-leasejobs: durable, lease-based jobs in your Django database.

The public face is small: ``job`` registers a function; ``Backoff`` tunes its retries;
``PermanentError`` dead-letters a job at once; ``Retry`` and ``Snooze`` let a handler choose
when it runs again; ``JobFailedError`` is what waiting for a job that ended dead or cancelled
raises; ``Workflow``, ``chain`` and ``group`` run jobs after one another (``workflows``).
State changes live in ``protocol``.
"""

from .core.backoff import Backoff
from .errors import JobFailedError, JobValidationError, PermanentError, UnknownJobError
from .jobs import job
from .retries import Retry, Snooze
from .workflows import Workflow, chain, group

__all__ = [
    "Backoff",
    "JobFailedError",
    "JobValidationError",
    "PermanentError",
    "Retry",
    "Snooze",
    "UnknownJobError",
    "Workflow",
    "chain",
    "group",
    "job",
]
__version__ = "0.1.0.dev0"
