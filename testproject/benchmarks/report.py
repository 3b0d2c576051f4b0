"""Medians over runs, the table of figures and ratios, and the targets of issue #6."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the median over runs; text (plans) and flags come from the last run."""
    keys: list[str] = []
    for run in runs:
        keys += [k for k in run if k not in keys]
    out: dict[str, Any] = {}
    for key in keys:
        values = [run[key] for run in runs if key in run]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        out[key] = statistics.median(numbers) if len(numbers) == len(values) else values[-1]
    _ratios(out)
    return out


def _ratios(m: dict[str, Any]) -> None:
    """Every drain figure also as a ratio to the raw ceiling and to the peer, same processes."""
    for key in list(m):
        found = re.fullmatch(r"(worker|loop)_p(\d+)(_b\d+_t\d+|_b\d+)?_per_s", key)
        if not found:
            continue
        procs = found.group(2)
        ceiling, peer = m.get(f"ceiling_p{procs}_per_s"), m.get(f"peer_p{procs}_per_s")
        if ceiling:
            m[key.replace("_per_s", "_vs_ceiling")] = m[key] / ceiling
        if peer:
            m[key.replace("_per_s", "_vs_peer")] = m[key] / peer


@dataclass(frozen=True)
class Goal:
    name: str
    key: str
    test: Callable[[float], bool]
    wanted: str


GOALS = [
    Goal("throughput, 2 processes", "worker_p2_per_s", lambda v: v >= 10_000, ">= 10,000 jobs/s"),
    Goal("throughput vs django-tasks worker", "worker_p2_vs_peer", lambda v: v >= 30, ">= 30x"),
    Goal("throughput vs raw-SQL ceiling", "worker_p2_vs_ceiling", lambda v: v >= 0.4, ">= 0.40"),
    Goal("bulk enqueue", "bulk_per_s", lambda v: v >= 50_000, ">= 50,000 jobs/s"),
    Goal("single enqueue vs raw INSERT", "single_vs_raw", lambda v: v >= 0.8, ">= 0.80"),
    Goal("NOTIFY latency p99, idle", "latency_notify_p99_ms", lambda v: v < 50, "< 50 ms"),
    Goal("claim at 1M vs 10k", "claim_one_queue_growth", lambda v: v <= 1.5, "<= 1.5x"),
]


def goals(m: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for goal in GOALS:
        value = m.get(goal.key)
        met = None if value is None else bool(goal.test(value))
        rows.append(
            {"goal": goal.name, "key": goal.key, "value": value, "wanted": goal.wanted, "met": met}
        )
    return rows


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def table(m: dict[str, Any], runs: int) -> str:
    """Figures as a plain-text table (Markdown-compatible), then the goals."""
    lines = [f"| figure (median of {runs}) | value |", "|---|---:|"]
    for key, value in m.items():
        if key.endswith("_plan"):
            continue
        lines.append(f"| {key} | {_fmt(value)} |")
    lines += ["", "| goal | figure | wanted | met |", "|---|---:|---|---|"]
    for row in goals(m):
        met = "not measured" if row["met"] is None else ("yes" if row["met"] else "NO")
        value = "-" if row["value"] is None else _fmt(row["value"])
        lines.append(f"| {row['goal']} | {value} | {row['wanted']} | {met} |")
    return "\n".join(lines)
