"""The workflow graph renderer: layers by depth, edges parent to child, escaped text, links."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from django_leasejobs.admin import workflow_graph as graph
from django_leasejobs.admin.workflow_graph import Node

from .conftest import SCRIPT

NS = {"svg": "http://www.w3.org/2000/svg"}


def diamond() -> list[Node]:
    return [
        Node(1, "fetch", "succeeded", (), "/job/1/"),
        Node(2, "parse", "running", (1,), "/job/2/"),
        Node(3, "thumbs", "dead", (1,), "/job/3/"),
        Node(4, "publish", "waiting", (2, 3)),
    ]


def test_depth_is_one_more_than_the_deepest_parent() -> None:
    nodes = [*diamond(), Node(5, "late", "waiting", (4, 1))]
    assert graph.depths(nodes) == {1: 0, 2: 1, 3: 1, 4: 2, 5: 3}


def test_a_long_chain_is_laid_out_without_recursion() -> None:
    nodes = [Node(i, f"s{i}", "waiting", (i - 1,) if i else ()) for i in range(5000)]
    assert graph.depths(nodes)[4999] == 4999


def test_a_cycle_or_an_unknown_parent_does_not_hang() -> None:
    nodes = [
        Node(1, "a", "waiting", (99,)),
        Node(2, "b", "waiting", (3,)),
        Node(3, "c", "waiting", (2,)),
    ]
    found = graph.depths(nodes)
    assert found[1] == 0
    assert found[2] == found[3] == 1


def test_the_markup_is_svg_with_boxes_edges_states_and_links() -> None:
    root = ET.fromstring(graph.render(diamond(), "g1", "run #7: order-42"))
    assert (root.get("role"), root.get("aria-labelledby")) == ("img", "g1-title")
    title = root.find("svg:title", NS)
    assert title is not None
    assert title.text == "run #7: order-42"
    edges = root.findall("svg:path", NS)
    assert len(edges) == 4  # 1->2, 1->3, 2->4, 3->4
    groups = {g.find("svg:text", NS).text: g.get("class") for g in root.iter(f"{{{NS['svg']}}}g")}
    assert groups == {
        "fetch": "leasejobs-step leasejobs-step-succeeded",
        "parse": "leasejobs-step leasejobs-step-running",
        "thumbs": "leasejobs-step leasejobs-step-dead",
        "publish": "leasejobs-step leasejobs-step-waiting",
    }
    links = [a.get("href") for a in root.findall("svg:a", NS)]
    assert links == ["/job/1/", "/job/2/", "/job/3/"]  # the waiting step has no job yet


def test_edges_point_from_the_parent_column_to_the_child_column() -> None:
    placed = {box.node.key: box for box in graph.layout(diamond()) if box.node}
    assert [placed[k].column for k in (1, 2, 3, 4)] == [0, 1, 1, 2]
    root = ET.fromstring(graph.render(diamond(), "g", "t"))
    for edge in root.findall("svg:path", NS):
        start, *_, end = edge.get("d", "").replace("M", "").replace("C", "").split()
        assert float(start.split(",")[0]) < float(end.split(",")[0])


def test_text_from_rows_is_escaped() -> None:
    nodes = [Node(1, SCRIPT, 'x" onload="alert(1)', (), '/j/"><script>x</script>')]
    markup = graph.render(nodes, "g", SCRIPT)
    assert "<script>" not in markup
    assert 'onload="' not in markup
    root = ET.fromstring(markup)
    assert all(not el.tag.endswith("script") for el in root.iter())


def test_a_crowded_column_draws_its_first_steps_and_counts_the_rest() -> None:
    members = [Node(i, f"m{i}", "succeeded", (0,)) for i in range(1, 1001)]
    nodes = [Node(0, "start", "succeeded"), *members, Node(1001, "cb", "waiting", range(1, 1001))]
    root = ET.fromstring(graph.render(nodes, "g", "big"))
    texts = [t.text for t in root.iter(f"{{{NS['svg']}}}text")]
    assert f"\u2026 {1000 - graph.MAX_PER_COLUMN + 1} more" in texts
    drawn = [
        g for g in root.iter(f"{{{NS['svg']}}}g") if "leasejobs-step-more" not in g.get("class")
    ]
    assert len(drawn) == 2 + graph.MAX_PER_COLUMN - 1
    # Edges only between drawn boxes: start -> each drawn member -> the callback.
    assert len(root.findall("svg:path", NS)) == 2 * (graph.MAX_PER_COLUMN - 1)


def test_an_empty_run_draws_an_empty_picture() -> None:
    root = ET.fromstring(graph.render([], "g", "nothing"))
    assert root.findall("svg:g", NS) == []


def test_a_long_chain_draws_its_first_columns_and_counts_the_rest() -> None:
    nodes = [Node(i, f"s{i}", "waiting", (i - 1,) if i else ()) for i in range(1000)]
    root = ET.fromstring(graph.render(nodes, "g", "chain"))
    texts = [t.text for t in root.iter(f"{{{NS['svg']}}}text")]
    assert f"\u2026 {1000 - graph.MAX_COLUMNS + 1} more" in texts
    assert len(root.findall("svg:path", NS)) == graph.MAX_COLUMNS - 2
