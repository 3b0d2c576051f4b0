"""Demo jobs: a quick one, a flaky one, a poison one; the demo command enqueues a mix."""

from __future__ import annotations

from django_leasejobs import Backoff, JobContext, job


@job
def greet(name: str) -> str:
    """Quick job: succeeds at once."""
    return f"hello {name}"


@job(takes_context=True, max_attempts=5, backoff=Backoff(base=0.5, cap=2, jitter="equal"))
def flaky_fetch(ctx: JobContext, url: str) -> str:
    """Fails on its first two attempts, succeeds on the third."""
    if ctx.attempt < 3:
        raise ConnectionError(f"{url} timed out (attempt {ctx.attempt})")
    return f"fetched {url} on attempt {ctx.attempt}"


@job(max_attempts=3, backoff=Backoff(base=0.5, cap=1, jitter="equal"))
def poison(payload: dict) -> None:
    """Always fails: it ends in the dead-letter table, ready to replay from the admin."""
    raise ValueError(f"cannot process {payload!r}")


@job
def minute_report() -> str:
    """Run by the per-minute demo schedule in settings (``LEASEJOBS_SCHEDULES``)."""
    from django_leasejobs.models import Job

    pending = Job.objects.filter(status="pending").count()
    return f"{pending} job(s) pending"
