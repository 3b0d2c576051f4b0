"""``django_leasejobs.operations``: an operator's calls from code, the public name.

What the admin's buttons, ``canceljob``, ``jobqueue`` and ``prunejobs`` do, for a script or
``manage.py shell``: cancel a job (or ask its worker to), make it due now, replay a dead letter,
pause and resume queues and job names, prune the limiters' rows. Each is one guarded statement
(or one short transaction) of the layers below, :mod:`django_leasejobs.protocol` and
:mod:`django_leasejobs.upkeep`; those folders are internal and move as the code asks, so
projects and the docs (docs/operations.md, docs/flow-control.md) import from here.

Each acts on the home queue database; with shards (``LEASEJOBS_QUEUE_DATABASES``) a call
inside ``with using_database("jobs2"):`` acts on that one (job ids repeat across databases).
"""

from .models.databases import using_database
from .protocol import (
    Cancel,
    Paused,
    cancel,
    pause,
    paused,
    replay,
    request_cancel,
    resume,
    retry_now,
    run_now,
)
from .upkeep import prune_limiters

__all__ = [
    "Cancel",
    "Paused",
    "cancel",
    "pause",
    "paused",
    "prune_limiters",
    "replay",
    "request_cancel",
    "resume",
    "retry_now",
    "run_now",
    "using_database",
]
