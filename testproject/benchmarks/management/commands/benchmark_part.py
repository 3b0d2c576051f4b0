"""``manage.py benchmark_part``: one benchmark section, run by ``manage.py benchmark``.

Internal: the ``benchmark`` command starts this in a subprocess whose DATABASE_URL names the
scratch database, so the section's Django code talks to that database and nothing else.
``loop-worker`` is the library-only worker that the ``loop`` section starts.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks import (
    bulk_cancel,
    claim_cost,
    drain,
    enqueue_rate,
    fairness,
    footprint,
    history_drop,
    latency,
    limits_drain,
    observability_drain,
    retention_drain,
    shards,
    sustained_history,
    workflows_drain,
)
from benchmarks.database import PORTABLE, Target

SECTIONS = (
    "enqueue",
    "claim",
    "ceiling",
    "peer",
    "pgqueuer",
    "loop",
    "worker",
    "async",
    "latency",
    "spike",
    "limits",
    "fairness",
    "retention",
    "history",
    "workflows",
    "bulk",
    "observability",
    "footprint",
    "shards",
    "partitions",
)


class Command(BaseCommand):
    help = "Internal: run one benchmark section in the scratch database (see `benchmark`)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("section", choices=(*SECTIONS, "loop-worker", "scale"))
        parser.add_argument("--options", default="{}", help="The section's options, as JSON.")
        parser.add_argument("--out", help="Write the section's figures here, as JSON.")
        parser.add_argument("--batch", type=int, default=100, help="loop-worker: claim size.")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.db import connection

        if connection.vendor != "postgresql" and options["section"] not in PORTABLE:
            raise CommandError("Benchmarks run on PostgreSQL only (but for the history section).")
        if options["section"] == "loop-worker":
            from benchmarks.loop_worker import run_loop

            run_loop(options["batch"], worker_id=f"loop-{os.getpid()}")
            return
        target = Target.from_settings(connection.settings_dict)
        section_options = json.loads(options["options"])
        figures = run_section(options["section"], target, section_options)
        if options["out"]:
            with open(options["out"], "w") as out:
                json.dump(figures, out)


def run_section(section: str, target: Target, o: dict[str, Any]) -> dict[str, Any]:
    if section == "scale":
        from benchmarks import scale

        return scale.run(target, o)
    n, timeout = o["jobs"], o["timeout"]
    if section == "enqueue":
        return enqueue_rate.run(target, jobs_count=n, single_count=o["single_jobs"])
    if section == "claim":
        return claim_cost.run(
            target, backlogs=o["backlogs"], batch=o["claim_batch"], reps=o["claim_reps"]
        )
    if section == "ceiling":
        return drain.ceiling(
            target, jobs_count=n, procs=o["procs"], batches=o["ceiling_batches"], timeout=timeout
        )
    if section == "peer":
        return drain.peer(target, jobs_count=o["peer_jobs"], procs=o["procs"], timeout=timeout)
    if section == "pgqueuer":
        return drain.pgqueuer(target, jobs_count=n, procs=o["procs"], timeout=timeout)
    if section == "loop":
        return drain.loop(
            target, jobs_count=n, procs=o["procs"], batches=o["batches"], timeout=timeout
        )
    if section == "worker":
        return drain.worker(
            target,
            jobs_count=n,
            procs=o["procs"],
            batches=o["batches"],
            threads=o["threads"],
            timeout=timeout,
        )
    if section == "async":
        return drain.async_sleep(
            target,
            jobs_count=o["async_jobs"],
            async_concurrency=o["async_concurrency"],
            timeout=timeout,
        )
    if section == "latency":
        return latency.latency(target, samples=o["latency_samples"], timeout=timeout)
    if section == "spike":
        return latency.spike(
            target,
            jobs_count=o["spike_jobs"],
            batch=o["spike_batch"],
            threads=o["spike_threads"],
            timeout=timeout,
        )
    if section == "limits":
        return limits_drain.run(
            target,
            jobs_count=o["limits_jobs"],
            procs=o["procs"],
            batch=o["limits_batch"],
            threads=o["limits_threads"],
            timeout=timeout,
        )
    if section == "fairness":
        return fairness.run(
            target,
            jobs_count=o["fair_jobs"],
            single_count=o["single_jobs"],
            procs=o["procs"],
            batch=o["batches"][0],
            threads=o["threads"][0],
            rounds=2,
            timeout=timeout,
        )
    if section == "retention":
        return retention_drain.run(
            target,
            jobs_count=n,
            old_rows=o["retention_rows"],
            procs=o["procs"],
            batch=o["batches"][0],
            threads=o["threads"][0],
            timeout=timeout,
        )
    if section == "history":
        return sustained_history.run(
            target,
            minutes=o["minutes"],
            rate=o["rate"],
            age=o["history_age"],
            variants=o["history_variants"],
            batch=o["batches"][0],
            threads=o["threads"][0],
            timeout=timeout,
        )
    if section == "workflows":
        return workflows_drain.run(
            target,
            jobs_count=o["workflow_jobs"],
            procs=max(o["procs"]),
            batch=o["batches"][0],
            threads=o["threads"][0],
            chain_steps=o["chain_steps"],
            timeout=timeout,
        )
    if section == "footprint":
        return footprint.run(target, jobs_count=n, timeout=timeout)
    if section == "observability":
        return observability_drain.run(target, jobs_count=n, procs=o["procs"], timeout=timeout)
    if section == "bulk":
        return bulk_cancel.run(target, jobs_count=o["bulk_jobs"])
    if section == "partitions":
        return history_drop.run(
            target,
            rows=o["history_rows"],
            batched_rows=o["batched_rows"],
            move_rows=o["move_rows"],
            jobs_count=n,
            timeout=timeout,
        )
    if section == "shards":
        return shards.run(target, jobs_count=n, single_count=o["single_jobs"], timeout=timeout)
    raise CommandError(f"Unknown section {section!r}.")
