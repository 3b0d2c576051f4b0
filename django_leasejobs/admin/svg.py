"""Line charts as SVG text, drawn on the server: no JavaScript, nothing fetched from elsewhere.

The markup carries no colour. Lines and labels get class names, and the admin's style sheet
gives them the admin theme's variables (``--link-fg``, ``--error-fg``, ``--body-quiet-color``),
so a chart follows the light and dark themes as the rest of the page does. Series differ by
dash pattern as well as by colour, so they can be told apart without colour. Every text that
comes from outside (titles, labels) is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 480, 190
LEFT, RIGHT, TOP, BOTTOM = 52, 10, 26, 22
"""The plot area's margins: y labels on the left, the legend above, x labels below."""

CHAR_WIDTH = 6.2
"""Roughly how wide one character of the 11-unit label font is, to space the legend."""


@dataclass(frozen=True)
class Series:
    """One line: its legend label, one value per x position (``None``: a gap), and the CSS
    class that colours and dashes it."""

    label: str
    values: Sequence[float | None]
    css: str


@dataclass(frozen=True)
class Chart:
    """What to draw: an accessible title, x labels as (position, text), the series, and how to
    write a y value."""

    title: str
    x_labels: Sequence[tuple[int, str]]
    series: Sequence[Series]
    y_format: Callable[[float], str]
    y_top: float


def nice_top(value: float, ladder: Sequence[float] = (1.0, 2.0, 5.0)) -> float:
    """The smallest ``ladder`` step times a power of ten at or above ``value`` (1 for none), so
    the top gridline reads as a round number."""
    if not math.isfinite(value) or value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    # 1e-9: 3.0000000001 read back from a float sum still tops out at 5, not at 10.
    return next(f * scale for f in (*ladder, 10.0) if f * scale >= value * (1 - 1e-9))


DURATION_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200)
DAY = 86400


def nice_duration_top(seconds: float) -> float:
    """Like :func:`nice_top`, on a clock's steps (15 s, 30 s, 1 min, ...) from a second up."""
    if not math.isfinite(seconds) or seconds <= 1:
        return nice_top(seconds)
    for step in DURATION_STEPS:
        if step >= seconds:
            return float(step)
    return float(DAY * math.ceil(seconds / DAY))


def _x(index: int, count: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span * index / (count - 1) if count > 1 else span / 2)


def _y(value: float, top: float) -> float:
    span = HEIGHT - TOP - BOTTOM
    return TOP + span * (1 - min(value, top) / top)


def _segments(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Runs of consecutive known values: a gap breaks the line."""
    runs: list[list[tuple[int, float]]] = [[]]
    for index, value in enumerate(values):
        if value is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((index, value))
    return [run for run in runs if run]


def _line(series: Series, count: int, top: float) -> list[str]:
    css = escape(series.css)
    shapes = []
    for run in _segments(series.values):
        points = [(_x(i, count), _y(v, top)) for i, v in run]
        if len(points) == 1:  # a lone point between gaps would draw nothing as a line
            ((x, y),) = points
            shapes.append(f'<circle class="{css}" cx="{x:.1f}" cy="{y:.1f}" r="1.8"/>')
        else:
            text = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            shapes.append(f'<polyline class="{css}" points="{text}"/>')
    return shapes


def _axes(chart: Chart, count: int) -> list[str]:
    parts = []
    for share in (0.0, 0.5, 1.0):
        value = chart.y_top * share
        y = _y(value, chart.y_top)
        css = "leasejobs-axis" if share == 0 else "leasejobs-grid"
        parts.append(
            f'<line class="{css}" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
        )
        label = escape(chart.y_format(value))
        parts.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    for index, text in chart.x_labels:
        x = _x(index, count)
        parts.append(
            f'<line class="leasejobs-grid" x1="{x:.1f}" x2="{x:.1f}" '
            f'y1="{TOP}" y2="{HEIGHT - BOTTOM}"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle">{escape(text)}</text>'
        )
    return parts


def _legend(chart: Chart) -> list[str]:
    parts, x = [], float(LEFT)
    for series in chart.series:
        css = escape(series.css)
        parts.append(f'<line class="{css}" x1="{x:.1f}" x2="{x + 18:.1f}" y1="11" y2="11"/>')
        parts.append(f'<text x="{x + 22:.1f}" y="15">{escape(series.label)}</text>')
        x += 22 + CHAR_WIDTH * len(series.label) + 14
    return parts


def render(chart: Chart, element_id: str) -> str:
    """The chart as an ``<svg>`` element (a string of escaped markup), ``role="img"`` with
    ``chart.title`` as its accessible name."""
    count = max((len(s.values) for s in chart.series), default=0)
    title_id = escape(f"{element_id}-title")
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{escape(element_id)}" '
        f'class="leasejobs-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{title_id}">',
        f'<title id="{title_id}">{escape(chart.title)}</title>',
        *_axes(chart, count),
        *_legend(chart),
    ]
    for series in chart.series:
        body.extend(_line(series, count, chart.y_top))
    body.append("</svg>")
    return "\n".join(body)
