"""The SVG renderer: well-formed markup, escaped text, gaps that break lines, round axes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from django_leasejobs.admin import charts, svg

from .conftest import SCRIPT

NS = {"svg": "http://www.w3.org/2000/svg"}


def chart(*series: svg.Series, title: str = "default: jobs finished per minute") -> svg.Chart:
    return svg.Chart(
        title=title,
        x_labels=[(0, "12:00"), (2, "12:02")],
        series=series,
        y_format=charts.rate,
        y_top=svg.nice_top(max((v or 0) for s in series for v in s.values)),
    )


def parse(markup: str) -> ET.Element:
    return ET.fromstring(markup)


def test_the_markup_is_well_formed_svg_with_an_accessible_name() -> None:
    root = parse(svg.render(chart(svg.Series("succeeded", [1, 2, 3, 2], "ok")), "c1"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("role"), root.get("aria-labelledby"), root.get("id")) == (
        "img",
        "c1-title",
        "c1",
    )
    title = root.find("svg:title", NS)
    assert title is not None
    assert (title.get("id"), title.text) == ("c1-title", "default: jobs finished per minute")
    (line,) = root.findall("svg:polyline", NS)
    assert line.get("class") == "ok"
    assert len(line.get("points", "").split()) == 4
    texts = [t.text for t in root.findall("svg:text", NS)]
    assert {"0", "2.5", "5", "12:00", "12:02", "succeeded"} <= set(texts)  # axes and legend


def test_text_from_outside_is_escaped() -> None:
    hostile = svg.Series(SCRIPT, [1.0, None, 2.0], 'x" onload="alert(1)')
    markup = svg.render(chart(hostile, title=f"{SCRIPT}: depth"), f'id"{SCRIPT}')
    assert "<script>" not in markup
    assert 'onload="' not in markup
    root = parse(markup)
    title = root.find("svg:title", NS)
    assert title is not None
    assert title.text == f"{SCRIPT}: depth"  # escaped in the markup, intact as text
    assert SCRIPT in [t.text for t in root.findall("svg:text", NS)]
    assert all(not el.tag.endswith("script") for el in root.iter())


def test_a_gap_breaks_the_line_and_a_lone_point_is_a_dot() -> None:
    values = [1.0, 2.0, None, 3.0, None, 1.0, 1.0, 1.0]
    root = parse(svg.render(chart(svg.Series("due", values, "due")), "c"))
    lines = root.findall("svg:polyline", NS)
    assert [len(p.get("points", "").split()) for p in lines] == [2, 3]
    (dot,) = root.findall("svg:circle", NS)
    assert dot.get("class") == "due"


def test_a_series_with_no_value_draws_nothing_but_the_axes() -> None:
    root = parse(svg.render(chart(svg.Series("p95", [None, None, None], "p95")), "c"))
    assert root.findall("svg:polyline", NS) == root.findall("svg:circle", NS) == []
    assert root.findall("svg:line", NS)  # gridlines, axis, the legend's sample


@pytest.mark.parametrize(
    ("value", "top"),
    [
        (0, 1),
        (-3, 1),
        (0.3, 0.5),
        (1, 1),
        (1.2, 2),
        (3, 5),
        (7, 10),
        (10, 10),
        (11, 20),
        (4600, 5000),
    ],
)
def test_the_top_of_the_axis_is_a_round_number(value: float, top: float) -> None:
    assert svg.nice_top(value) == pytest.approx(top)


@pytest.mark.parametrize(
    ("seconds", "top"),
    [(0.2, 0.2), (1.5, 2), (40, 60), (61, 120), (3000, 3600), (50000, 86400), (90000, 172800)],
)
def test_a_duration_axis_tops_out_on_a_clock_step(seconds: float, top: float) -> None:
    assert svg.nice_duration_top(seconds) == pytest.approx(top)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0"),
        (0.25, "250ms"),
        (2.5, "2.5s"),
        (60, "1m"),
        (90, "1m30s"),
        (7200, "2h"),
        (5400, "1h30m"),
        (86400, "1d"),
        (129600, "1d12h"),
    ],
)
def test_short_durations_on_the_axis(seconds: float, text: str) -> None:
    assert charts.short_duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (12, "12"), (2.5, "2.5"), (0.05, "0.05"), (12.34, "12.3"), (123.4, "123")],
)
def test_rates_per_minute(value: float, text: str) -> None:
    assert charts.rate(value) == text
