"""The dashboard's charts through the test client: a range by ``?range=``, four charts and a
table per queue, escaped names, and a bad range that falls back to the default."""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import QueueSample

from .conftest import SCRIPT, url

pytestmark = pytest.mark.django_db

MINUTE = dt.timedelta(minutes=1)
SVG = re.compile(r"<svg [^>]*class=\"leasejobs-chart\".*?</svg>", re.S)


def sampled(queue: str, minutes_ago: int, **numbers: int) -> None:
    minute = db_now().replace(second=0, microsecond=0) - minutes_ago * MINUTE
    QueueSample.objects.create(minute=minute, queue=queue, **numbers)


def svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(markup) for markup in SVG.findall(page)]


def test_four_charts_and_a_table_per_queue(viewer) -> None:
    sampled("default", 2, succeeded=12, retried=3, dead=1, due=7, running=2)
    sampled("mail", 3, succeeded=4)
    response = viewer.get(url("dashboard"))
    assert response.status_code == 200
    history = response.context["history"]
    assert history["range"].key == "1h"
    assert [q["name"] for q in history["queues"]] == ["default", "mail"]
    page = response.content.decode()
    charts = svgs(page)
    assert len(charts) == 8
    titles = [c.find("{http://www.w3.org/2000/svg}title") for c in charts]
    assert [t.text for t in titles[:4] if t is not None] == [
        "default: jobs finished per minute, last hour",
        "default: queue depth, last hour",
        "default: oldest due age, last hour",
        "default: p95 run time, last hour",
    ]
    assert len({c.get("id") for c in charts}) == 8  # ids unique on the page
    default = history["queues"][0]
    assert len(default["rows"]) == 60
    assert default["rows"][-2]["cells"][:5] == ["12", "3", "1", "7", "2"]
    assert default["rows"][-1]["cells"] is None  # nobody sampled the last minute
    assert page.count('<td colspan="7">no sample</td>') == 2 * 58
    assert '<strong aria-current="page">last hour</strong>' in page
    assert 'href="?range=24h#leasejobs-history"' in page


@pytest.mark.parametrize(("query", "key"), [("24h", "24h"), ("7d", "7d"), ("1h", "1h")])
def test_the_range_is_chosen_by_a_query_parameter(viewer, query: str, key: str) -> None:
    sampled("default", 30, succeeded=10)
    response = viewer.get(url("dashboard"), {"range": query})
    assert response.status_code == 200
    history = response.context["history"]
    assert history["range"].key == key
    rows = history["queues"][0]["rows"]
    assert len(rows) == history["range"].points
    assert sum(1 for row in rows if row["cells"]) == 1


@pytest.mark.parametrize("query", ["", "1d", "7D", "24h ", "../../x", SCRIPT, "1h\x00", "9" * 500])
def test_a_bad_range_is_the_default_never_an_error(viewer, query: str) -> None:
    response = viewer.get(url("dashboard"), {"range": query})
    assert response.status_code == 200
    assert response.context["history"]["range"].key == "1h"
    assert SCRIPT not in response.content.decode()


def test_a_repeated_range_takes_the_last(viewer) -> None:
    response = viewer.get(url("dashboard") + "?range=bogus&range=7d")
    assert response.context["history"]["range"].key == "7d"


def test_queue_names_are_escaped_in_charts_and_tables(viewer) -> None:
    sampled(SCRIPT, 1, succeeded=1)
    page = viewer.get(url("dashboard")).content.decode()
    assert SCRIPT not in page
    assert "&lt;script&gt;alert(" in page
    assert len(svgs(page)) == 4  # still well-formed with the name inside


def test_no_history_says_so(viewer) -> None:
    response = viewer.get(url("dashboard"))
    assert response.context["history"]["queues"] == []
    assert 'id="leasejobs-no-history"' in response.content.decode()


def test_the_history_costs_two_queries_whatever_the_queues(viewer) -> None:
    for number in range(5):
        for minutes_ago in range(1, 4):
            sampled(f"queue-{number}", minutes_ago, succeeded=minutes_ago)
    with CaptureQueriesContext(connection) as queries:
        response = viewer.get(url("dashboard"), {"range": "7d"})
    assert len(response.context["history"]["queues"]) == 5
    table = QueueSample._meta.db_table
    assert sum(1 for q in queries.captured_queries if table in q["sql"]) == 2
