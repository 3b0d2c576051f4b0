"""``django_leasejobs.signals``: the documented name of the job signals, kept working.

The signals live in :mod:`django_leasejobs.db.signals` (they are sent at commit); projects
connect their receivers as ``from django_leasejobs.signals import job_dead`` (docs/operations.md).
"""

from .db.signals import (
    job_cancelled,
    job_dead,
    job_enqueued,
    job_processed,
    job_retried,
    job_started,
    job_succeeded,
    jobs_claimed,
    lease_lost,
)

__all__ = [
    "job_cancelled",
    "job_dead",
    "job_enqueued",
    "job_processed",
    "job_retried",
    "job_started",
    "job_succeeded",
    "jobs_claimed",
    "lease_lost",
]
