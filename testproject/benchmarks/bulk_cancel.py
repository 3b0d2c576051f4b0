"""Section ``bulk``: claims while a bulk cancel walks a million pending jobs.

The table holds N due pending no-op jobs in one queue (written in one statement). A claimer
(this thread) claims 10 at a time and completes them, as a worker does, first alone for
``ALONE_S`` seconds, then while another thread cancels the whole queue through
``django_leasejobs.bulk`` (batches of 1,000, each its own transaction, rows locked in id order
while the claims take the same queue's head with SKIP LOCKED). The figures: claims per second
and the longest claim alone and during the cancel, their ratios, and the cancel's rate.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from django.contrib.auth.models import User
from django.db import connection

from django_leasejobs import bulk, protocol

from . import database
from .database import Target

QUEUE = "bulk"
CLAIM = 10
ALONE_S = 10.0


def _claim() -> float:
    """One claim (timed, in ms), then its completion (not timed)."""
    start = time.perf_counter()
    jobs = protocol.claim("bulk-benchmark", batch=CLAIM, queues=[QUEUE])
    took = (time.perf_counter() - start) * 1000
    protocol.complete_many([(job.pk, job.attempt) for job in jobs], finished_by="bulk")
    return took


def _claims_until(done: threading.Event | None, seconds: float) -> tuple[list[float], float]:
    """Claim in a loop until ``done`` is set (or for ``seconds``): (each claim's ms, seconds)."""
    times: list[float] = []
    start = time.perf_counter()
    while (done is None and time.perf_counter() - start < seconds) or (
        done is not None and not done.is_set()
    ):
        times.append(_claim())
    return times, time.perf_counter() - start


def run(target: Target, *, jobs_count: int) -> dict[str, Any]:
    with target.connect() as conn:
        database.reset(conn)
        database.seed(conn, jobs_count, queue=QUEUE)
        database.vacuum_analyze(conn)
    user_id = User.objects.get_or_create(username="bulk-benchmark")[0].pk
    alone, alone_s = _claims_until(None, ALONE_S)

    done = threading.Event()
    outcome: dict[str, Any] = {}

    def cancel() -> None:
        try:
            start = time.perf_counter()
            rows = bulk.jobs({"queue": QUEUE})
            action = bulk.ACTIONS["cancel"]
            result = bulk.run(action, rows, user_id=user_id, description="bench", source="bench")
            outcome["seconds"] = time.perf_counter() - start
            outcome["result"] = result
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=cancel, name="bulk-cancel")
    thread.start()
    during, during_s = _claims_until(done, 0)
    thread.join()
    result, seconds = outcome["result"], outcome["seconds"]
    alone_rate = len(alone) / alone_s
    longest_alone = max(alone, default=0.0)
    during_rate = len(during) / during_s if during_s else 0.0
    return {
        "bulk_jobs": jobs_count,
        "bulk_cancelled": result.changed["cancelled"],
        "bulk_cancel_s": seconds,
        "bulk_cancel_rows_per_s": result.changed["cancelled"] / seconds,
        "bulk_claims_alone_per_s": alone_rate,
        "bulk_claims_alone_max_ms": longest_alone,
        "bulk_claims_alone_median_ms": statistics.median(alone) if alone else 0.0,
        "bulk_claims_during": len(during),
        "bulk_claims_during_per_s": during_rate,
        "bulk_claims_during_max_ms": max(during, default=0.0),
        "bulk_claims_during_median_ms": statistics.median(during) if during else 0.0,
        "bulk_claims_during_vs_alone": during_rate / alone_rate if alone_rate else 0.0,
        "bulk_max_claim_during_vs_alone": (
            max(during, default=0.0) / longest_alone if longest_alone else 0.0
        ),
    }
