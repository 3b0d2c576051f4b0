"""The lease advisor's rule: a lease and heartbeat from a job's runtime distribution.

A lease shorter than the work makes healthy workers lose their claims when beats are late; a
long one makes a crashed worker's job wait that long to be retried. The rule: a lease of a
quarter more than p99 (so a run whose beats are delayed still usually ends inside it), at
least ``MIN_LEASE`` and at most ``MAX_LEASE`` (past that the heartbeat keeps long runs, and a
crash is still retried within minutes), renewed four times per lease (three missed beats of
slack), or eight when stale reports say beats do get missed. Leases come from a short list of
round values, each a whole number of its heartbeats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HEADROOM = 1.25
"""Lease over p99: a quarter more, which also covers the histogram's error (under 19 %)."""
BEATS = 4
"""Heartbeats per lease: one lost beat, or three, still keep the claim."""
STALE_LIMIT = 0.01
"""Stale reports above this share of runs: beats are missed, so the heartbeat is halved."""
LEASES = (20.0, 40.0, 60.0, 80.0, 120.0, 180.0, 240.0, 300.0)
MIN_LEASE, MAX_LEASE = LEASES[0], LEASES[-1]


@dataclass(frozen=True)
class Suggestion:
    lease: float
    heartbeat: float
    reason: str


def suggest(p99: float | None, largest: float, runs: int, stale: int) -> Suggestion | None:
    """The lease and heartbeat for a job whose runs have this p99 (None: no runs)."""
    if p99 is None or runs == 0:
        return None
    lease = next((value for value in LEASES if value >= p99 * HEADROOM), MAX_LEASE)
    beats = BEATS
    missed = stale > STALE_LIMIT * runs
    if missed:
        beats *= 2
    heartbeat = lease / beats
    parts = []
    if missed:
        parts.append(f"{stale} stale reports in {runs} runs say beats are missed")
    parts.append(f"p99 {seconds_text(p99)}")
    crash = f"a crash is retried after {seconds_text(lease)}"
    if p99 * HEADROOM > MAX_LEASE:
        crash += f", not after a whole run (up to {seconds_text(largest)})"
    parts.append(
        f"lease {seconds_text(lease)} renewed every {seconds_text(heartbeat)} keeps a healthy "
        f"run's claim with {beats - 1} missed beats of slack"
    )
    parts.append(crash)
    return Suggestion(lease, heartbeat, "; ".join(parts))


def heartbeat_keeps(lease: float | None, heartbeat: float | None) -> bool:
    """Whether renewals can keep this lease: there is a heartbeat and it comes inside it."""
    return heartbeat is not None and lease is not None and 0 < heartbeat < lease


def seconds_text(seconds: float) -> str:
    """``0.25 s``, ``2.5 s``, ``41 s``, ``5 min``, ``1.5 h``: short, for the one sentence."""
    if seconds < 10:
        return f"{float(f'{seconds:.2g}'):g} s"
    if seconds < 120:
        return f"{math.floor(seconds + 0.5)} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"
