"""``manage.py benchmark``: the benchmark suite of SPEC §9 on a scratch PostgreSQL database.

It creates (and afterwards drops) its own database beside the configured one, runs each section
``--runs`` times in subprocesses pointed at it, prints the medians as a table with ratios and the
targets of issue #6, and writes everything (every run, the plans, the machine) as JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from benchmarks import (
    baseline,
    database,
    machine,
    report,
    scale_command,
    scale_fill,
    sustained_history,
)
from benchmarks.database import Target
from benchmarks.management.commands.benchmark_part import SECTIONS
from django_leasejobs.core.durations import parse_duration


def _positive_ints(value: str) -> list[int]:
    try:
        numbers = [int(part) for part in value.split(",")]
    except ValueError:
        raise ValueError(f"expected comma-separated whole numbers, got {value!r}") from None
    if not numbers or any(n < 1 for n in numbers):
        raise ValueError(f"expected numbers of at least 1, got {value!r}")
    return numbers


def _sections(value: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown or not names:
        raise ValueError(
            f"unknown section(s) {unknown or value!r}; choose from {', '.join(SECTIONS)}"
        )
    return names


def _check_scale_options(o: dict[str, Any]) -> None:
    if o["scale"] < scale_fill.MIN_TOTAL:
        raise CommandError(f"--scale must be at least {scale_fill.MIN_TOTAL}, not {o['scale']}.")
    if o["scale_runs"] < 1:
        raise CommandError(f"--scale-runs must be at least 1, not {o['scale_runs']}.")
    if o["prune_rows"] < 0:
        raise CommandError(f"--prune-rows must be 0 (no pruning) or more, not {o['prune_rows']}.")


def _history_options(o: dict[str, Any]) -> dict[str, Any]:
    if not o["minutes"] > 0:
        raise CommandError(f"--minutes must be a positive number, not {o['minutes']}.")
    if o["rate"] < 1:
        raise CommandError(f"--rate must be at least 1, not {o['rate']}.")
    try:
        age = parse_duration(o["history_age"])
    except ValueError as exc:
        raise CommandError(f"--history-age: {exc}") from None
    if age <= dt.timedelta(0):
        raise CommandError("--history-age must be a positive age.")
    variants = [v.strip() for v in o["history_variants"].split(",") if v.strip()]
    unknown = [v for v in variants if v not in sustained_history.VARIANTS]
    if unknown or not variants:
        raise CommandError(
            f"unknown history variant(s) {unknown or o['history_variants']!r}; "
            f"choose from {', '.join(sustained_history.VARIANTS)}"
        )
    return {
        "minutes": o["minutes"],
        "rate": o["rate"],
        "history_age": o["history_age"],
        "history_variants": variants,
    }


@dataclass(frozen=True)
class Side:
    """What one side of a run measures: this checkout ("") or a baseline commit (its ref),
    in its own scratch database, with its subprocesses' extra environment."""

    ref: str
    target: Target
    env: dict[str, str]


class Command(BaseCommand):
    help = (
        "Measure throughput, enqueue rate, claim cost, latency and memory on PostgreSQL "
        "(the history section on any database)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add = parser.add_argument
        add("--jobs", type=int, default=20_000, help="No-op jobs per drain and bulk enqueue.")
        add("--runs", type=int, default=3, help="Runs; figures are the median over them.")
        add("--only", default=",".join(SECTIONS), help=f"Sections: {', '.join(SECTIONS)}.")
        add("--skip", default="", help="Sections to leave out.")
        add("--json", dest="json_path", help="Write every figure, run by run, to this file.")
        add("--procs", default="1,2", help="Worker process counts.")
        # The best figures on the 2-core machine of docs/benchmarks.md came from batches of
        # 128-256 with as many threads or more (a claim in flight while the last batch runs).
        add("--batches", default="64,128", help="Worker batch sizes (claim size).")
        add("--threads", default="128,256", help="Worker thread counts (--concurrency).")
        add("--ceiling-batches", default="100,500", help="Batch sizes of the raw-SQL ceiling.")
        add("--async-jobs", type=int, default=10_000, help="Jobs awaiting asyncio.sleep(1).")
        add("--async-concurrency", type=int, default=2000, help="The async section's worker's.")
        add(
            "--single-jobs",
            type=int,
            default=2000,
            help="Jobs enqueued one at a time (per variant: enqueue and shards sections).",
        )
        add("--peer-jobs", type=int, help="Jobs for the django-tasks worker (default: --jobs).")
        add("--backlogs", default="10000,100000,1000000", help="Pending rows for claim cost.")
        add("--claim-batch", type=int, default=100)
        add("--claim-reps", type=int, default=50, help="Claims timed per backlog.")
        add("--latency-samples", type=int, default=200)
        add("--spike-jobs", type=int, default=50_000)
        add("--spike-batch", type=int, help="The spike's workers' --batch (default: theirs).")
        add("--spike-threads", type=int, help="Their --concurrency (default: theirs).")
        add("--limits-jobs", type=int, default=20_000, help="Jobs per drain of the limits section.")
        add("--limits-batch", type=int, default=64, help="The limits section's worker batch.")
        add("--limits-threads", type=int, default=64, help="The limits section's worker threads.")
        add("--fair-jobs", type=int, default=20_000, help="Jobs per drain of the fairness section.")
        add(
            "--retention-rows",
            type=int,
            default=1_000_000,
            help="Old succeeded rows the retention section's workers prune while draining.",
        )
        add(
            "--minutes",
            type=float,
            default=10,
            help="How long each run of the history section's variants enqueues (0.5: 30 s).",
        )
        add(
            "--rate",
            type=int,
            default=2000,
            help="Jobs a second the history section's paced producer enqueues.",
        )
        add(
            "--history-age",
            default="1m",
            help="The history section's LEASEJOBS_RETENTION age of succeeded jobs (30s, 1m, ...).",
        )
        add(
            "--history-variants",
            default=",".join(sustained_history.VARIANTS),
            help=f"The history section's variants: {', '.join(sustained_history.VARIANTS)}.",
        )
        add("--workflow-jobs", type=int, default=10_000, help="Members of the workflows group.")
        add("--chain-steps", type=int, default=1000, help="Steps of the workflows chain.")
        add(
            "--bulk-jobs",
            type=int,
            default=1_000_000,
            help="Pending jobs the bulk section cancels while a claimer claims.",
        )
        add(
            "--history-rows",
            type=int,
            default=5_000_000,
            help="partitions: finished jobs in the day whose history partition is dropped.",
        )
        add(
            "--batched-rows",
            type=int,
            default=200_000,
            help="partitions: finished jobs of the same age deleted in batches, for the rate.",
        )
        add(
            "--move-rows",
            type=int,
            default=500_000,
            help="partitions: old finished jobs movejobhistory moves during a drain.",
        )
        add("--timeout", type=float, default=900, help="Seconds before a drain is given up.")
        add("--scratch-db", help="Scratch database name (default: <configured name>_bench).")
        add("--keep-db", action="store_true", help="Keep the scratch database afterwards.")
        add(
            "--scale",
            type=int,
            help="Instead of the suite: time the admin, stats and probes "
            "on a database of this many jobs (docs/benchmarks.md, 'At scale').",
        )
        add(
            "--scale-shape",
            choices=scale_fill.SHAPES,
            default="mix",
            help="mix: 10%% due, "
            "10%% future, the rest finished; pending: every job pending (half due).",
        )
        add("--scale-db", help="Its database (default: <configured name>_scale_<shape>); kept.")
        add(
            "--scale-reuse", action="store_true", help="Reuse it when it holds that shape and size."
        )
        add("--scale-runs", type=int, default=5, help="Runs per face; the median is reported.")
        add(
            "--prune-rows",
            type=int,
            default=1_000_000,
            help="Finished rows prunejobs deletes while a worker claims (0: skip; mix shape).",
        )
        add("--explain", action="store_true", help="Print the plans of slow statements.")
        add(
            "--baseline",
            metavar="REF",
            help="Also run every section on the library of this commit (a git ref), "
            "alternated with this checkout's in the same run, and print their ratios.",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        if o["scale"] is not None:
            _check_scale_options(o)
        else:
            options = self._options(o)
        settings_dict = connections["default"].settings_dict
        vendor = connections["default"].vendor
        if vendor != "postgresql" and (
            o["scale"] is not None
            or any(name not in database.PORTABLE for name in options["sections"])
        ):
            raise CommandError(
                "Benchmarks run on PostgreSQL only: set DATABASE_URL=postgres://... "
                f"(the configured database is {vendor}); on any database, "
                f"--only {','.join(database.PORTABLE)}."
            )
        configured = Target.from_settings(settings_dict)
        if o["scale"] is not None:
            self._scale(configured, o)
            return
        target = configured.named(o["scratch_db"] or f"{configured.name}_bench")
        if target.name == configured.name:
            raise CommandError(
                "--scratch-db must differ from the configured database: it is dropped."
            )
        sections = self._available(options["sections"])

        sides = [Side("", target, {})]
        if o["baseline"]:
            try:
                library = str(baseline.unpack(o["baseline"]))
            except baseline.BaselineError as exc:
                raise CommandError(str(exc)) from None
            base = target.named(f"{target.name}_base")
            sides.append(Side(o["baseline"], base, {"BENCHMARK_LIBRARY": library}))
        load_before = os.getloadavg()
        # The shards section's second queue database: the "shard" alias, beside each side's.
        shards = "shards" in sections
        try:
            for side in sides:
                self._say(f"scratch database {side.target.name}: creating and migrating")
                database.create(side.target)
                database.migrate(side.target, **side.env)
                if shards:
                    database.create(database.shard(side.target))
                    database.migrate(side.target, database.SHARD_ALIAS, **side.env)
            runs = self._run(sides, sections, options)
            about = machine.describe(target)
            about["load_average_before"] = load_before
        finally:
            if not o["keep_db"]:
                for side in sides:
                    database.drop(side.target)
                    if shards:
                        database.drop(database.shard(side.target))
        figures = report.medians(runs[""])
        self.stdout.write(report.summary(figures, len(runs[""])) + "\n\n")
        self.stdout.write(report.table(figures, len(runs[""])))
        baseline_figures = None
        if o["baseline"]:
            baseline_figures = report.medians(runs[o["baseline"]])
            compared = baseline.comparison(figures, baseline_figures, o["baseline"])
            self.stdout.write("\n\n" + compared)
        if o["json_path"]:
            document = {
                "machine": about,
                "options": options,
                "sections": sections,
                "summary": report.summary(figures, len(runs[""])),
                "median": figures,
                "goals": report.goals(figures),
                "runs": runs[""],
            }
            if o["baseline"]:
                document["baseline"] = {
                    "ref": o["baseline"],
                    "median": baseline_figures,
                    "runs": runs[o["baseline"]],
                }
            with open(o["json_path"], "w") as out:
                json.dump(document, out, indent=2, default=str)
            self._say(f"wrote {o['json_path']}")

    def _scale(self, configured: Target, o: dict[str, Any]) -> None:
        """``--scale N``: fill (or reuse) a database of N jobs and time every face on it."""
        shape, total = o["scale_shape"], o["scale"]
        target = configured.named(o["scale_db"] or f"{configured.name}_scale_{shape}")
        if target.name == configured.name:
            raise CommandError("--scale-db must differ from the configured database.")
        scale_command.prepare(target, shape, total, o["scale_reuse"], scale_command.say)
        options = {
            "runs": o["scale_runs"],
            "faces": True,
            "explain": o["explain"],
            "prune_rows": o["prune_rows"] if shape == "mix" else 0,
        }
        figures = scale_command.measure(target, options)
        self.stdout.write(scale_command.table(figures, shape, total))
        if o["explain"]:
            self.stdout.write("\n" + scale_command.plans(figures))
        if o["json_path"]:
            with open(o["json_path"], "w") as out:
                json.dump({"machine": machine.describe(target), **figures}, out, indent=2)
            self._say(f"wrote {o['json_path']}")
        self._say(f"kept {target.name} for --scale-reuse (drop it by hand when done)")

    def _options(self, o: dict[str, Any]) -> dict[str, Any]:
        for name in (
            "jobs",
            "runs",
            "async_jobs",
            "async_concurrency",
            "single_jobs",
            "claim_batch",
            "claim_reps",
            "latency_samples",
            "spike_jobs",
            "limits_jobs",
            "limits_batch",
            "limits_threads",
            "fair_jobs",
            "retention_rows",
            "workflow_jobs",
            "chain_steps",
            "bulk_jobs",
            "history_rows",
            "batched_rows",
            "move_rows",
        ):
            if o[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')} must be at least 1, not {o[name]}.")
        for name in ("peer_jobs", "spike_batch", "spike_threads"):  # None: a default elsewhere
            if o[name] is not None and o[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')} must be at least 1, not {o[name]}.")
        if o["timeout"] <= 0:
            raise CommandError("--timeout must be a positive number of seconds.")
        history = _history_options(o)
        try:
            skip = set(_sections(o["skip"])) if o["skip"] else set()
            sections = [s for s in _sections(o["only"]) if s not in skip]
            parsed = {
                name: _positive_ints(o[name])
                for name in ("procs", "batches", "threads", "ceiling_batches", "backlogs")
            }
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not sections:
            raise CommandError("No section left to run.")
        return {
            "sections": sections,
            "jobs": o["jobs"],
            "runs": o["runs"],
            "async_jobs": o["async_jobs"],
            "async_concurrency": o["async_concurrency"],
            "single_jobs": o["single_jobs"],
            "peer_jobs": o["peer_jobs"] or o["jobs"],
            "claim_batch": o["claim_batch"],
            "claim_reps": o["claim_reps"],
            "latency_samples": o["latency_samples"],
            "spike_jobs": o["spike_jobs"],
            "spike_batch": o["spike_batch"],
            "spike_threads": o["spike_threads"],
            "limits_jobs": o["limits_jobs"],
            "limits_batch": o["limits_batch"],
            "limits_threads": o["limits_threads"],
            "fair_jobs": o["fair_jobs"],
            "retention_rows": o["retention_rows"],
            "workflow_jobs": o["workflow_jobs"],
            "chain_steps": o["chain_steps"],
            "bulk_jobs": o["bulk_jobs"],
            "history_rows": o["history_rows"],
            "batched_rows": o["batched_rows"],
            "move_rows": o["move_rows"],
            "timeout": o["timeout"],
            **history,
            **parsed,
        }

    def _available(self, sections: list[str]) -> list[str]:
        """Leave out (and say so) what this installation cannot run."""
        missing = {}
        if "runjobworker" not in get_commands():
            for name in (
                "worker",
                "async",
                "latency",
                "spike",
                "limits",
                "fairness",
                "retention",
                "workflows",
                "observability",
                "footprint",
                "shards",
            ):
                missing[name] = "no runjobworker command in this installation"
        try:
            import django_tasks_db  # noqa: F401
        except ImportError:
            missing["peer"] = "django-tasks-db is not installed (pip install -e '.[benchmark]')"
        try:
            import opentelemetry.sdk  # noqa: F401
        except ImportError:
            missing["observability"] = "opentelemetry-sdk is not installed (the benchmark extra)"
        try:
            import pgqueuer  # noqa: F401
        except ImportError:
            missing["pgqueuer"] = "pgqueuer is not installed (pip install -e '.[benchmark]')"
        for name in sections:
            if name in missing:
                self._say(f"section {name} not run: {missing[name]}")
        return [name for name in sections if name not in missing]

    def _run(
        self, sides: list[Side], sections: list[str], options: dict[str, Any]
    ) -> dict[str, list[dict[str, Any]]]:
        """Figures run by run, per side (this checkout is ""). Sides alternate section by
        section, the first side changing from run to run, so drift hits both alike."""
        runs: dict[str, list[dict[str, Any]]] = {side.ref: [] for side in sides}
        for index in range(options["runs"]):
            figures: dict[str, dict[str, Any]] = {side.ref: {} for side in sides}
            order = sides if index % 2 == 0 else sides[::-1]
            for section in sections:
                for side in order:
                    label = f" ({side.ref})" if side.ref else ""
                    self._say(f"run {index + 1}/{options['runs']}: {section}{label}")
                    start = time.perf_counter()
                    try:
                        figures[side.ref].update(self._section(side, section, options))
                    except CommandError:
                        if not side.ref:
                            raise
                        # The baseline's code may lack what a section of this checkout needs:
                        # its figures are missing from the comparison, the rest is measured.
                        self._say(f"  {section} failed on {side.ref}: left out of its figures")
                        continue
                    self._say(f"  {section} took {time.perf_counter() - start:.1f} s")
            for side in sides:
                runs[side.ref].append(figures[side.ref])
        return runs

    def _section(self, side: Side, section: str, options: dict[str, Any]) -> dict[str, Any]:
        """Run one section; a failed one (a server restart, say) is run again, twice at most."""
        import subprocess

        for attempt in range(3):
            with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
                argv = database.manage(
                    "benchmark_part", section, "--options", json.dumps(options), "--out", out.name
                )
                env = database.environment(side.target, **side.env)
                done = subprocess.run(argv, env=env, check=False)
                if not done.returncode:
                    return json.load(out)
            self._say(f"  {section} failed (exit {done.returncode}); attempt {attempt + 1} of 3")
            time.sleep(10)
        raise CommandError(f"section {section} failed three times.")

    def _say(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
