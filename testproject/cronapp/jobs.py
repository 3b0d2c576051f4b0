"""A job with its schedule in code: every minute, the newest missed minute only."""

from __future__ import annotations

from django_leasejobs import job


@job(cron="* * * * *", timezone="Europe/Paris", misfire="latest", jitter=0)
def every_minute() -> str:
    return "ran"
