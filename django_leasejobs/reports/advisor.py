"""The lease advisor's numbers: each job name's runtimes, lease, heartbeat and a suggestion.

``jobstats --leases``, the admin's lease page and the ``W005``/``W006`` checks all read
:func:`collect`, so they agree. It reads the per-hour rows the workers flush
(:class:`~django_leasejobs.models.RuntimeStat`): one grouped query adds the counters of the
window, a second reads each name's newest lease and heartbeat. Registered jobs with no runs in
the window are listed too, with their configured lease, so a job never run shows as such.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Max, Q, Sum

from ..core import histogram, registry
from ..core.conf import settings
from ..db import dbtime
from ..models import RuntimeStat
from ..models.databases import read_database
from ..upkeep.runtime_stats import hour_of
from .lease_advice import STALE_LIMIT, Suggestion, heartbeat_keeps, suggest

WINDOW = dt.timedelta(days=7)
DAY = dt.timedelta(days=1)
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


@dataclass
class JobLeases:
    """One job name over the window; seconds throughout, ``None`` where nothing is known."""

    name: str
    runs: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    mean: float | None = None
    stale: int = 0
    recovered: int = 0
    runs_last_day: int = 0
    stale_last_day: int = 0
    lease: float | None = None
    heartbeat: float | None = None
    suggestion: Suggestion | None = field(default=None)

    @property
    def reason(self) -> str:
        if self.suggestion is None:
            return "no runs recorded in the window: nothing to suggest yet"
        return self.suggestion.reason

    @property
    def heartbeat_off(self) -> bool:
        """No heartbeat renews this lease (none recorded, or not inside the lease)."""
        return not heartbeat_keeps(self.lease, self.heartbeat)

    @property
    def p99_over_lease(self) -> bool:
        return self.p99 is not None and self.lease is not None and self.p99 > self.lease

    @property
    def stale_share(self) -> float:
        """Stale reports of the last day per run of the last day (0 when neither)."""
        if not self.stale_last_day:
            return 0.0
        return self.stale_last_day / max(self.runs_last_day, 1)

    @property
    def too_stale(self) -> bool:
        return self.stale_share > STALE_LIMIT

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        suggestion = data.pop("suggestion")
        data["suggested_lease"] = suggestion["lease"] if suggestion else None
        data["suggested_heartbeat"] = suggestion["heartbeat"] if suggestion else None
        data["reason"] = self.reason
        return data


def collect(window: dt.timedelta = WINDOW, using: str | None = None) -> list[JobLeases]:
    """Every job name with runs in the window or registered here, sorted by name."""
    alias = using or read_database()
    now = dbtime.db_now(alias)
    rows = RuntimeStat.objects.using(alias).filter(hour__gte=hour_of(now - window))
    jobs = {name: _configured(name) for name in registry.registered()}
    for totals in _totals(rows, now):
        name = totals["name"]
        jobs[name] = _job(name, totals, jobs.get(name))
    for name, lease, heartbeat in _newest(rows):
        jobs[name].lease = lease if lease is not None else jobs[name].lease
        jobs[name].heartbeat = heartbeat
    return [jobs[name] for name in sorted(jobs)]


def _configured(name: str) -> JobLeases:
    """What a job's lease would be now: its ``@job(lease=...)`` or the setting."""
    spec = registry.lookup(name)
    lease = spec.lease if spec is not None and spec.lease else settings.LEASE_SECONDS
    return JobLeases(name=name, lease=lease, heartbeat=settings.HEARTBEAT_SECONDS)


def _totals(rows: Any, now: dt.datetime) -> Any:
    """One row per name: every counter added up over the window, and the last day's."""
    recent = Q(hour__gte=hour_of(now - DAY))
    sums = {column: Sum(column) for column in histogram.field_names()}
    return (
        rows.order_by()
        .values("name")
        .annotate(
            **sums,
            total_runs=Sum("runs"),
            total_seconds=Sum("seconds"),
            largest=Max("max_seconds"),
            total_stale=Sum("stale"),
            total_recovered=Sum("recovered"),
            day_runs=Sum("runs", filter=recent),
            day_stale=Sum("stale", filter=recent),
        )
    )


def _job(name: str, totals: dict[str, Any], known: JobLeases | None) -> JobLeases:
    job = known or _configured(name)
    counts = [int(totals[column] or 0) for column in histogram.field_names()]
    largest = float(totals["largest"] or 0.0)
    job.runs = int(totals["total_runs"] or 0)
    job.stale = int(totals["total_stale"] or 0)
    job.recovered = int(totals["total_recovered"] or 0)
    job.runs_last_day = int(totals["day_runs"] or 0)
    job.stale_last_day = int(totals["day_stale"] or 0)
    if job.runs:
        for label, fraction in PERCENTILES:
            setattr(job, label, histogram.percentile(counts, fraction, largest))
        job.max = largest
        job.mean = float(totals["total_seconds"] or 0.0) / job.runs
    job.suggestion = suggest(job.p99, largest, job.runs, job.stale)
    return job


def _newest(rows: Any) -> list[tuple[str, float | None, float | None]]:
    """Each name's lease and heartbeat as its newest flush recorded them."""
    newest: dict[str, tuple[str, float | None, float | None]] = {}
    ordered = rows.order_by("name", "-hour").values_list(
        "name", "lease_seconds", "heartbeat_seconds"
    )
    for name, lease, heartbeat in ordered:
        newest.setdefault(name, (name, lease, heartbeat))
    return list(newest.values())
