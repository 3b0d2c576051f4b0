"""``jobstats --leases``: the lease advisor as an aligned table, one job name a row.

Each row shows the window's runtimes (p50/p95/p99/max), the lease and heartbeat the newest
flush recorded, stale reports and recovered expiries, and the suggestion; the reason for each
suggestion follows the table, one sentence a job.
"""

from __future__ import annotations

from django_leasejobs.reports.advisor import JobLeases
from django_leasejobs.reports.lease_advice import seconds_text

HEADERS = (
    "job",
    "runs",
    "p50",
    "p95",
    "p99",
    "max",
    "lease",
    "heartbeat",
    "stale",
    "recovered",
    "suggest lease",
    "heartbeat",
)


def _seconds(value: float | None) -> str:
    return "-" if value is None else seconds_text(value)


def _cells(job: JobLeases) -> list[str]:
    suggestion = job.suggestion
    return [
        job.name,
        str(job.runs),
        _seconds(job.p50),
        _seconds(job.p95),
        _seconds(job.p99),
        _seconds(job.max),
        _seconds(job.lease),
        "off" if job.heartbeat_off else _seconds(job.heartbeat),
        str(job.stale),
        str(job.recovered),
        _seconds(suggestion.lease if suggestion else None),
        _seconds(suggestion.heartbeat if suggestion else None),
    ]


def table(jobs: list[JobLeases]) -> str:
    """The rows, then ``name: reason`` for every job."""
    if not jobs:
        return "No job is registered and no runs were recorded in the window."
    rows = [list(HEADERS), *(_cells(job) for job in jobs)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(HEADERS))]
    lines = []
    for row in rows:
        first = f"{row[0]:<{widths[0]}}"
        pairs = zip(row[1:], widths[1:], strict=True)
        rest = "".join(f"  {cell:>{width}}" for cell, width in pairs)
        lines.append(first + rest)
    lines.append("")
    lines += [f"{job.name}: {job.reason}" for job in jobs]
    return "\n".join(lines)
