"""django-leasejobs: durable, lease-based jobs in your Django database.

The public face is small: ``job`` registers a function; ``Backoff`` tunes its retries;
``PermanentError`` dead-letters a job at once; ``Retry`` and ``Snooze`` let a handler choose
when it runs again. State changes live in ``protocol``.
"""

from .backoff import Backoff
from .errors import JobValidationError, PermanentError, UnknownJobError
from .jobs import job
from .retries import Retry, Snooze

__all__ = [
    "Backoff",
    "JobValidationError",
    "PermanentError",
    "Retry",
    "Snooze",
    "UnknownJobError",
    "job",
]
__version__ = "0.1.0.dev0"
