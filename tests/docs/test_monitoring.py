"""The Grafana dashboard and the Prometheus alert rules shipped in docs/monitoring/ query only
metrics and labels the exporter (``django_leasejobs.metrics``) really has.

The exporter's names are read from a scrape of its own registry, with one job waiting (every
gauge has a sample) and each counter's signal sent once (every counter has one): a renamed
metric or label fails here, and so does a new metric that the dashboard does not show. The
PromQL is read simply: the names it queries, and the labels it matches or groups by.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from testapp import jobs

from django_leasejobs import metrics
from django_leasejobs.models import Job

MONITORING = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
DASHBOARD = MONITORING / "leasejobs-dashboard.json"
RULES = MONITORING / "leasejobs-alerts.yml"

KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"(?<![\w:.])([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")
NAME = re.compile(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()")
LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)")


def queried(expr: str) -> tuple[set[str], set[str]]:
    """The metric names an expression reads, and the label names it matches or groups by."""
    labels = {label for group in GROUPING.findall(expr) for label in split(group)}
    labels |= {label for _, inside in SELECTOR.findall(expr) for label in MATCHER.findall(inside)}
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (and the $variables in them)
    bare = GROUPING.sub("", re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", bare))  # matchers, ranges
    names = {name for name in NAME.findall(bare) if name not in KEYWORDS}
    return names, labels


def split(group: str) -> set[str]:
    return {label.strip() for label in group.split(",") if label.strip()}


def test_the_promql_reader() -> None:
    assert queried(
        'sum by (queue) (rate(leasejobs_jobs_dead_total{queue=~"$queue", a!="x{y}"}[5m])) > 0'
    ) == ({"leasejobs_jobs_dead_total"}, {"queue", "a"})
    assert queried("max(a_b) / ignoring(c) b:c offset 5m and bool 1e3") == (
        {"a_b", "b:c"},
        {"c"},
    )


@pytest.fixture
def exported(db: None) -> dict[str, set[str]]:
    """``{sample name: label names}`` of a scrape of the exporter's own registry."""
    jobs.noop.using(queue="mail").enqueue()
    metrics.install(with_stats=False)
    try:
        for _, signal, _ in metrics.COUNTERS:
            signal.send(sender=Job, queue="mail")
        text, _ = metrics.render()
    finally:
        metrics.uninstall()
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(sample.labels)
    return found


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    found = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found.append(variable["query"]["query"])
    return found


def rule_expressions() -> list[tuple[str, str, str]]:
    """``(alert, expr, for)`` of each rule: one ``expr:`` line each, as the file writes them
    (read without a YAML library; ``test_the_rules_are_the_yaml_they_look_like`` checks)."""
    rules: list[tuple[str, str, str]] = []
    for line in RULES.read_text(encoding="utf-8").splitlines():
        key, _, value = line.strip().removeprefix("- ").partition(": ")
        if key == "alert":
            rules.append((value, "", ""))
        elif key in ("expr", "for"):
            alert, expr, duration = rules[-1]
            rules[-1] = (alert, value, duration) if key == "expr" else (alert, expr, value)
    return rules


def check(expr: str, exported: dict[str, set[str]]) -> list[str]:
    values = LABEL_VALUES.fullmatch(expr.strip())
    if values:  # a Grafana variable's query: label_values(metric, label)
        names, labels = {values[1]}, {values[2]}
    else:
        names, labels = queried(expr)
    wrong = []
    for name in sorted(names - set(exported)):
        wrong.append(f"{expr}: the exporter has no metric {name}")
    carried = set().union(*(exported.get(name, set()) for name in names))
    for label in sorted(labels - carried):
        wrong.append(f"{expr}: no metric it reads has the label {label}")
    return wrong


def test_the_dashboard_queries_only_what_the_exporter_has(exported: dict[str, set[str]]) -> None:
    assert {"leasejobs_oldest_due_age_seconds", "leasejobs_jobs_dead_total"} <= set(exported)
    wrong = [problem for expr in dashboard_expressions() for problem in check(expr, exported)]
    assert wrong == []


def test_the_dashboard_shows_every_metric_of_the_exporter(exported: dict[str, set[str]]) -> None:
    shown = set().union(*(queried(expr)[0] for expr in dashboard_expressions()))
    shown -= {"label_values"}
    missing = {name for name in exported if not name.endswith("_created")} - shown
    assert missing == set(), f"add a panel to {DASHBOARD.name} for {sorted(missing)}"


def test_the_alert_rules_query_only_what_the_exporter_has(exported: dict[str, set[str]]) -> None:
    rules = rule_expressions()
    by_name = {alert: (expr, duration) for alert, expr, duration in rules}
    assert set(by_name) >= {"JobQueueStalled", "JobsDeadLettered"}
    stalled, dead = by_name["JobQueueStalled"][0], by_name["JobsDeadLettered"][0]
    assert queried(stalled)[0] == {"leasejobs_oldest_due_age_seconds"}
    assert by_name["JobQueueStalled"][1], "the oldest due age alert waits (for: N minutes)"
    assert queried(dead)[0] <= {"leasejobs_dead_letters_last_hour", "leasejobs_jobs_dead_total"}
    wrong = [problem for _, expr, _ in rules for problem in check(expr, exported)]
    assert wrong == []


def test_the_rules_are_the_yaml_they_look_like() -> None:
    yaml = pytest.importorskip("yaml")  # the dev extra brings it (through schemathesis)
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    assert [(r["alert"], r["expr"], r.get("for", "")) for r in rules] == rule_expressions()
