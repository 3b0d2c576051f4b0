"""``django_leasejobs.backends.LeaseJobsBackend``: the path projects put in ``TASKS``.

The backend lives in :mod:`django_leasejobs.tasks.backend`; this module stays so that settings,
and imports of these names, written before the move keep working. Import nothing else here.
"""

from .tasks.backend import (
    InvalidTask,
    InvalidTaskArguments,
    LeaseJobsBackend,
    LeaseTask,
    TaskResultDoesNotExist,
    UnsupportedTaskArgument,
)

__all__ = [
    "InvalidTask",
    "InvalidTaskArguments",
    "LeaseJobsBackend",
    "LeaseTask",
    "TaskResultDoesNotExist",
    "UnsupportedTaskArgument",
]
