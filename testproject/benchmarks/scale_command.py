"""``manage.py benchmark --scale N``: fill (or reuse) a database of N jobs, time every face on it.

The database is kept afterwards, unlike the suite's scratch database: filling ten million rows
takes minutes, and ``--scale-reuse`` runs again on what a previous run filled (when its shape and
size match; otherwise it is filled again). Drop it by hand when done (``DROP DATABASE``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import psycopg

from . import database, scale_fill
from .database import Target


def prepare(
    target: Target, shape: str, total: int, reuse: bool, say: Callable[[str], None]
) -> None:
    """Reuse the database when asked and it holds ``total`` rows of ``shape``; else fill it."""
    if reuse:
        try:
            with target.connect() as conn:
                found = scale_fill.filled_as(conn)
        except psycopg.OperationalError:
            found = None
        if found == (shape, total):
            say(f"reusing {target.name}: {total:,} rows, shape {shape}")
            return
        say(f"{target.name} holds {found or 'nothing'}, not ({shape}, {total:,}): filling it")
    say(f"creating {target.name} and filling it with {total:,} rows, shape {shape}")
    database.create(target)
    database.migrate(target)
    with target.connect() as conn:
        scale_fill.fill(conn, shape, total, say)


def measure(target: Target, options: dict[str, Any]) -> dict[str, Any]:
    """The faces, then pruning, each in a subprocess pointed at the filled database: a server
    restart during the long pruning (other work shares the server) keeps the faces' figures."""
    figures = _part(target, {**options, "prune_rows": 0})
    if options["prune_rows"]:
        try:
            figures["prune"] = _part(target, {**options, "faces": False})["prune"]
        except subprocess.CalledProcessError as exc:
            figures["prune"] = {"prune_skipped": f"prunejobs part failed (exit {exc.returncode})"}
    return figures


def _part(target: Target, options: dict[str, Any]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        argv = database.manage(
            "benchmark_part", "scale", "--options", json.dumps(options), "--out", out.name
        )
        subprocess.run(argv, env=database.environment(target), check=True)
        figures: dict[str, Any] = json.load(out)
        return figures


def table(figures: dict[str, Any], shape: str, total: int) -> str:
    """The medians, one face a line, with the statement count and the slowest statement."""
    faces = figures.get("faces", {})
    runs = len(next(iter(faces.values()))["runs_ms"]) if faces else 0
    lines = [
        f"scale: {total:,} rows, shape {shape}; median of {runs} runs (ms)",
        "contents: " + ", ".join(f"{k[5:]} {v:,}" for k, v in figures["contents"].items()),
        "",
        f"{'face':<30} {'median':>9} {'min':>9} {'max':>9} {'stmts':>6} {'slowest':>9}",
    ]
    for label, face in faces.items():
        lines.append(
            f"{label:<30} {face['median_ms']:9.1f} {min(face['runs_ms']):9.1f} "
            f"{max(face['runs_ms']):9.1f} {face['statements']:6d} {face['slowest_ms']:9.1f}"
        )
    prune = figures.get("prune")
    if prune and "prune_rows" in prune:
        lines += [
            "",
            f"prunejobs: {prune['prune_rows']:,} rows in {prune['prune_seconds']:.0f} s "
            f"({prune['prune_rows_per_s']:,.0f} rows/s); meanwhile {prune['prune_claims']} claims "
            f"of 100: median {prune['prune_claim_median_ms']:.1f} ms, "
            f"p99 {prune['prune_claim_p99_ms']:.1f} ms, worst {prune['prune_claim_max_ms']:.1f} ms",
        ]
    elif prune:
        lines += ["", f"prunejobs: not run ({prune['prune_skipped']})"]
    return "\n".join(lines) + "\n"


def plans(figures: dict[str, Any]) -> str:
    """The plan of every slow statement, under the face that sent it."""
    out = []
    for label, face in figures.get("faces", {}).items():
        for plan in face.get("plans", []):
            out += [f"--- {label}: {plan['ms']:.1f} ms", plan["sql"], plan["params"], plan["plan"]]
    return "\n".join(out) + "\n" if out else "no statement over the plan threshold\n"


def say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
