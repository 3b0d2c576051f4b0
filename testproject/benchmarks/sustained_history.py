"""Section ``history``: sustained load with ``LEASEJOBS_RETENTION``: does the history stop
growing once its oldest rows pass their age?

A producer thread of this process enqueues no-op jobs with ``enqueue_many`` for ``minutes``
while two ``runjobworker`` processes (the first of ``--batches`` and ``--threads``) drain them
with ``LEASEJOBS_RETENTION = {"succeeded": age}``. Variants:

- ``paced``: the producer enqueues ``rate`` jobs a second, a batch every 0.1 s (a late batch
  catches up), so the workers finish jobs at that rate;
- ``full``: the producer keeps ``BACKLOG`` jobs waiting, so the workers finish jobs as fast as
  they can: their full drain rate, with the lease holder pruning beside it;
- ``full_plain``: the same with no retention, the drain rate ``full`` is compared to.

At the half and at the end (the workers still running) it reads the size of the app's tables
with their indexes (PostgreSQL: ``pg_total_relation_size``, over ``pg_partition_tree`` for the
job table; MariaDB/MySQL: ``data_length + index_length`` after ``ANALYZE TABLE``; SQLite: the
pages of their b-trees in ``dbstat``), the rows, and the succeeded rows older than the age
(those retention has yet to delete: the backlog). Between them, every tenth of the run, the
rows and the backlog alone. Runs on every database (``database.PORTABLE``): it goes through
Django only.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from django.core.management.color import no_style
from django.db import close_old_connections, connection
from testapp import jobs

from django_leasejobs import upkeep
from django_leasejobs.core.durations import parse_duration
from django_leasejobs.models import Job, Status, Worker

from . import database, drain
from .database import Target
from .processes import Group

VARIANTS = ("paced", "full", "full_plain")
BACKLOG = 10_000
"""Jobs the ``full`` variants' producer keeps waiting: more than the two workers take in the
producer's 0.1 s between top-ups."""
CHUNK = 1000
"""Most jobs one ``enqueue_many`` call inserts."""
TICK = 0.1
"""Seconds between the producer's batches."""
SAMPLES = 10
"""Light samples (rows, backlog) per run, beside the two full ones."""
LIVE = (Status.PENDING, Status.RUNNING, Status.FAILED)


def _say(message: str) -> None:
    sys.stderr.write(f"  history: {message}\n")
    sys.stderr.flush()


def _reset() -> None:
    """Empty the app's tables (the statements ``flush`` would send, for them alone)."""
    tables = [
        t for t in connection.introspection.table_names() if t.startswith("django_leasejobs_")
    ]
    statements = connection.ops.sql_flush(no_style(), tables, reset_sequences=True)
    connection.ops.execute_sql_flush(statements)


def table_bytes() -> int:
    """The app's tables with their indexes (every partition of the job table), in bytes."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # pg_partition_tree lists no row for a table that is not partitioned.
            cursor.execute(
                "SELECT COALESCE((SELECT sum(pg_total_relation_size(relid)) "
                "FROM pg_partition_tree('django_leasejobs_job')), "
                "pg_total_relation_size('django_leasejobs_job'))"
            )
            job = int(cursor.fetchone()[0])
            cursor.execute(
                "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
                "AND NOT c.relispartition AND c.relname LIKE 'django\\_leasejobs\\_%%' "
                "AND c.relname <> 'django_leasejobs_job'"
            )
            return job + int(cursor.fetchone()[0])
        if connection.vendor == "mysql":
            cursor.execute(
                "SELECT table_name FROM information_schema.TABLES "
                "WHERE table_schema = DATABASE() AND table_name LIKE 'django\\_leasejobs\\_%%'"
            )
            names = [row[0] for row in cursor.fetchall()]
            quoted = ", ".join(connection.ops.quote_name(name) for name in names)
            cursor.execute(f"ANALYZE TABLE {quoted}")
            cursor.fetchall()
            cursor.execute(
                "SELECT COALESCE(SUM(data_length + index_length), 0) "
                "FROM information_schema.TABLES "
                "WHERE table_schema = DATABASE() AND table_name LIKE 'django\\_leasejobs\\_%%'"
            )
            return int(cursor.fetchone()[0])
        cursor.execute(
            "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN "
            "(SELECT name FROM sqlite_master WHERE tbl_name LIKE 'django\\_leasejobs\\_%%' "
            "ESCAPE '\\')"
        )
        return int(cursor.fetchone()[0])


class Producer(threading.Thread):
    """Enqueues no-op jobs until stopped: ``rate`` a second, or (``rate`` None) enough to
    keep ``BACKLOG`` waiting. ``enqueued`` counts them; an error is kept for the caller."""

    def __init__(self, rate: float | None) -> None:
        super().__init__(daemon=True)
        self.rate = rate
        self.enqueued = 0
        self.started_at = 0.0
        self.stopped_at = 0.0
        self.error: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        self.started_at = time.monotonic()
        try:
            while not self.stopping.is_set():
                self._batch()
                self.stopping.wait(TICK)
        except BaseException as exc:  # reported by the caller, which stops the workers
            self.error = exc
        finally:
            self.stopped_at = time.monotonic()
            connection.close()

    def _batch(self) -> None:
        if self.rate is not None:
            wanted = int(self.rate * (time.monotonic() - self.started_at)) - self.enqueued
        else:
            wanted = BACKLOG - Job.objects.filter(status__in=LIVE).count()
        while wanted > 0 and not self.stopping.is_set():
            count = min(wanted, CHUNK)
            jobs.noop.enqueue_many([((), {})] * count)
            self.enqueued += count
            wanted -= count

    @property
    def per_s(self) -> float:
        span = (self.stopped_at or time.monotonic()) - self.started_at
        return self.enqueued / span if span > 0 else float("nan")


def _counts(age: dt.timedelta) -> dict[str, int]:
    """Rows of the job table, those not finished, and the backlog. Not in
    one transaction: on SQLite (IMMEDIATE transactions) it would hold the workers' writes."""
    return {
        "rows": Job.objects.count(),
        "live": Job.objects.filter(status__in=LIVE).count(),
        "overdue": upkeep.count_prunable(Status.SUCCEEDED, age),
    }


def _wait_for_workers(group: Group, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while Worker.objects.count() < count and time.monotonic() < deadline:
        if any(p.poll() is not None for p in group.procs):
            group.check()
            raise RuntimeError("a worker exited at start")
        time.sleep(0.2)


def _one(
    target: Target,
    variant: str,
    *,
    seconds: float,
    rate: int,
    age: dt.timedelta,
    argv: Sequence[str],
) -> dict[str, Any]:
    _reset()
    retention = {} if variant.endswith("_plain") else {"succeeded": f"{age.total_seconds():g}s"}
    env = database.environment(target, BENCHMARK_RETENTION=json.dumps(retention))
    group = Group.start([argv, argv], env)
    out: dict[str, Any] = {}
    producer = Producer(rate if variant == "paced" else None)
    try:
        _wait_for_workers(group, 2)
        producer.start()
        started = time.monotonic()
        marks = {seconds * (i + 1) / SAMPLES: "light" for i in range(SAMPLES)}
        marks[seconds / 2] = "half"
        marks[seconds] = "end"
        overdue_max = 0
        for at in sorted(marks):
            while (left := started + at - time.monotonic()) > 0 and producer.is_alive():
                group.sample()
                time.sleep(min(left, 0.5))
            if producer.error is not None or not producer.is_alive():
                raise RuntimeError(f"the producer stopped: {producer.error!r}")
            if any(p.poll() is not None for p in group.procs):
                group.check()
                raise RuntimeError("a worker exited")
            if marks[at] == "end":
                producer.stopping.set()
                producer.join()
            enqueued = producer.enqueued  # before the counts: none of them finished yet
            counts = _counts(age)
            overdue_max = max(overdue_max, counts["overdue"])
            finished = enqueued - counts["live"]
            _say(
                f"{variant} t={time.monotonic() - started:.0f}s enqueued={enqueued} "
                f"finished={finished} rows={counts['rows']} overdue={counts['overdue']}"
            )
            if marks[at] == "light":
                continue
            size = table_bytes()
            when = marks[at]
            out[f"{when}_s"] = time.monotonic() - started
            out[f"{when}_mib"] = size / 2**20
            out[f"{when}_rows"] = counts["rows"]
            out[f"{when}_overdue"] = counts["overdue"]
            out[f"{when}_finished"] = finished
            # The rows deleted: the enqueued ones no longer in the table (one count; the live
            # and succeeded counts, read one after the other while workers finish jobs, can
            # both hold a job that finished between them).
            out[f"{when}_pruned"] = enqueued - counts["rows"]
            _say(f"{variant} {when}: {size / 2**20:.1f} MiB")
    finally:
        producer.stopping.set()
        if producer.is_alive():
            producer.join()
        group.stop()
        close_old_connections()
    span = out["end_s"] - out["half_s"]
    figures = {
        "enqueued_per_s": producer.per_s,
        "finished_per_s": (out["end_finished"] - out["half_finished"]) / span,
        "pruned_per_s": (out["end_pruned"] - out["half_pruned"]) / span,
        "pruned": out["end_pruned"],
        "size_half_mib": out["half_mib"],
        "size_end_mib": out["end_mib"],
        "size_growth": out["end_mib"] / out["half_mib"] if out["half_mib"] else float("nan"),
        "rows_half": out["half_rows"],
        "rows_end": out["end_rows"],
        "overdue_half": out["half_overdue"],
        "overdue_end": out["end_overdue"],
        "overdue_max": overdue_max,
    }
    return {f"history_{variant}_{key}": value for key, value in figures.items()}


def run(
    target: Target,
    *,
    minutes: float,
    rate: int,
    age: str,
    variants: Sequence[str],
    batch: int | None,
    threads: int | None,
    timeout: float,
) -> dict[str, Any]:
    """Each variant for ``minutes``; its figures, and ``full`` over ``full_plain``."""
    seconds = minutes * 60
    if seconds + 120 > timeout:
        raise RuntimeError(f"--timeout {timeout:g} s is shorter than a {seconds:g} s run")
    parsed = parse_duration(age)
    # A heartbeat a second (the default is 15 s): the first writes the worker's row, which is
    # how the run knows both are up before the producer starts.
    argv = drain.worker_argv("--heartbeat", "1", batch=batch, threads=threads)
    out: dict[str, Any] = {
        "history_minutes": minutes,
        "history_rate": rate,
        "history_age_s": parsed.total_seconds(),
        "history_database": connection.vendor,
    }
    if connection.vendor == "postgresql":
        # Without it nothing reclaims the live partition's dead rows: the size cannot level.
        with connection.cursor() as cursor:
            cursor.execute("SHOW autovacuum")
            out["history_autovacuum"] = cursor.fetchone()[0]
    for variant in variants:
        out.update(_one(target, variant, seconds=seconds, rate=rate, age=parsed, argv=argv))
    full, plain = (
        out.get("history_full_finished_per_s"),
        out.get("history_full_plain_finished_per_s"),
    )
    if full and plain:
        out["history_full_vs_plain"] = full / plain
    return out
