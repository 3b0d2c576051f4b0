"""The dashboard's charts: per queue, four line charts of a range and a table of their numbers.

The history comes from :func:`django_leasejobs.reports.history.collect`; this module only turns
its points into :mod:`.svg` charts, axis labels in the admin's time zone, and table rows, so
that a screen reader (or anyone who wants the exact figure) reads the same numbers the lines
draw.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import mark_safe

from ..reports import history
from . import display, svg

ChartSpec = tuple[str, str, Sequence[tuple[str, str, str]], bool]
CHARTS: tuple[ChartSpec, ...] = (
    (
        "finished",
        "jobs finished per minute",
        (
            ("succeeded", "succeeded", "leasejobs-line-succeeded"),
            ("retried", "retried", "leasejobs-line-retried"),
            ("dead", "dead", "leasejobs-line-dead"),
        ),
        False,
    ),
    (
        "depth",
        "queue depth",
        (("due", "due", "leasejobs-line-due"), ("running", "running", "leasejobs-line-running")),
        False,
    ),
    ("age", "oldest due age", (("oldest_due_age", "oldest due", "leasejobs-line-age"),), True),
    ("p95", "p95 run time", (("p95_run_time", "p95 run time", "leasejobs-line-p95"),), True),
)
"""(id, title, ((Point field, legend label, CSS class), ...), values are durations)."""

TICKS: dict[str, Callable[[dt.datetime], bool]] = {
    "1h": lambda t: t.minute % 15 == 0,
    "24h": lambda t: t.hour % 6 == 0 and t.minute < 10,
    "7d": lambda t: t.hour == 0,
}
"""Which points get an x label, read in the admin's time zone (whole hours may not be)."""
TICK_FORMAT = {"1h": "%H:%M", "24h": "%H:%M", "7d": "%a %d"}


def chosen_range(request: HttpRequest) -> history.Range:
    """``?range=1h|24h|7d``; anything else is the default (never an error)."""
    return history.RANGES.get(request.GET.get("range", ""), history.DEFAULT_RANGE)


def short_duration(seconds: float) -> str:
    """Axis labels: ``250ms``, ``2.5s``, ``1m30s``, ``2h``, ``1d``."""
    if seconds == 0:
        return "0"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:g}s"
    for unit, size, smaller, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if seconds >= size:
            whole, rest = divmod(int(seconds), size)
            return f"{whole}{unit}" + (f"{rest // small_size}{smaller}" if rest else "")
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m" + (f"{rest}s" if rest else "")


def rate(value: float) -> str:
    """Jobs per minute: whole numbers as they are, averages to a sensible precision."""
    if value == int(value):
        return str(int(value))
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}".rstrip("0").rstrip(".") if value < 10 else f"{value:.1f}"


def _chart(
    spec: ChartSpec, queue: str, points: list[history.Point], r: history.Range, number: int
) -> str:
    key, title, lines, durations = spec
    series = [
        svg.Series(label, [getattr(p, field) for p in points], css) for field, label, css in lines
    ]
    peak = max((v for s in series for v in s.values if v is not None), default=0.0)
    local = [timezone.localtime(p.start) for p in points]
    chart = svg.Chart(
        title=f"{queue}: {title}, {r.label}",
        x_labels=[
            (i, t.strftime(TICK_FORMAT[r.key])) for i, t in enumerate(local) if TICKS[r.key](t)
        ],
        series=series,
        y_format=short_duration if durations else rate,
        y_top=svg.nice_duration_top(peak) if durations else svg.nice_top(peak),
    )
    return svg.render(chart, f"leasejobs-chart-{number}-{key}")


def _row(point: history.Point) -> dict[str, Any]:
    local = timezone.localtime(point.start)
    if not point.sampled:
        return {"time": local, "cells": None}
    durations = (point.oldest_due_age, point.p95_run_time)
    return {
        "time": local,
        "cells": [
            rate(point.succeeded or 0.0),
            rate(point.retried or 0.0),
            rate(point.dead or 0.0),
            str(point.due),
            str(point.running),
            *(display.human_duration(d) for d in durations),
        ],
    }


def context(r: history.Range) -> dict[str, Any]:
    """The template's ``history``: the range links, and per queue its charts and table."""
    numbers = history.collect(r)
    return {
        "range": r,
        "ranges": list(history.RANGES.values()),
        "per_minute": r.step == 1,
        "queues": [
            {
                "name": queue,
                "number": number,
                # svg.render escapes every text it writes.
                "charts": [mark_safe(_chart(spec, queue, points, r, number)) for spec in CHARTS],
                "rows": [_row(p) for p in points],
            }
            for number, (queue, points) in enumerate(numbers.queues.items())
        ],
    }
