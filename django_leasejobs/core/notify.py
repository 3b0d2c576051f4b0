"""LISTEN/NOTIFY on PostgreSQL: its channels and payloads.

Whether it is on is the dialect's to say (``dialects.notifies``). The sending side is the
PostgreSQL dialect (the ``pg_notify`` travels in the enqueuing or
finishing statement or transaction, so it is delivered on commit and never for a rolled-back
change); the receiving sides are ``listener.Listener``, in the worker, and ``results``, for
a caller waiting for a job to finish.
"""

from __future__ import annotations

CHANNEL = "leasejobs"
"""One channel for every queue; the payload is the queue name."""

CANCEL_CHANNEL = "leasejobs_cancel"
"""Cancel requests for running jobs; the payload is the job id. A channel of its own, so a
queue named like a number is never mistaken for one."""


FINISHED_CHANNEL = "leasejobs_finished"
"""Jobs that finished (succeeded, dead or cancelled); the payload is their ids, comma-separated.
One notification per finishing statement, not per job: a worker's grouped completion of a
hundred jobs sends one."""

IDS_PER_NOTIFICATION = 300
"""Ids in one finish notification: 300 ids of 19 digits and their commas stay under the 8000
bytes PostgreSQL allows a payload."""


def finished_payloads(ids: list[int]) -> list[str]:
    """The payloads announcing ``ids`` as finished, ``IDS_PER_NOTIFICATION`` ids each."""
    step = IDS_PER_NOTIFICATION
    return [",".join(str(int(i)) for i in ids[n : n + step]) for n in range(0, len(ids), step)]


def finished_ids(payload: str) -> set[int]:
    """The job ids of a finish notification's payload (anything else in it is ignored)."""
    parts = (part.strip() for part in payload.split(","))
    return {int(part) for part in parts if part.isascii() and part.isdecimal()}
