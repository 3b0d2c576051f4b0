"""``manage.py benchmark``: its input checks, and a tiny smoke run (nothing here is timed)."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from django_leasejobs.models import Job


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--procs", "0"], "at least 1"),
        (["--batches", "ten"], "comma-separated whole numbers"),
        (["--only", "enqueue,nonsense"], "unknown section"),
        (["--only", "claim", "--skip", "claim"], "No section left"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--async-jobs", "0"], "--async-jobs must be at least 1"),
        (["--async-concurrency", "-5"], "--async-concurrency must be at least 1"),
        (["--timeout", "-1"], "--timeout must be a positive"),
        (["--spike-threads", "0"], "--spike-threads must be at least 1"),
        (["--peer-jobs", "0"], "--peer-jobs must be at least 1"),
        (["--limits-jobs", "0"], "--limits-jobs must be at least 1"),
        (["--limits-threads", "0"], "--limits-threads must be at least 1"),
        (["--retention-rows", "0"], "--retention-rows must be at least 1"),
        (["--history-rows", "0"], "--history-rows must be at least 1"),
        (["--batched-rows", "-1"], "--batched-rows must be at least 1"),
        (["--move-rows", "0"], "--move-rows must be at least 1"),
        (["--minutes", "0"], "--minutes must be a positive number"),
        (["--rate", "0"], "--rate must be at least 1"),
        (["--history-age", "7"], "--history-age: '7' has no unit"),
        (["--history-age", "0s"], "--history-age must be a positive age"),
        (["--history-variants", "paced,slow"], "unknown history variant"),
    ],
)
def test_bad_options_are_refused_with_a_clear_message(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("benchmark", *args)


def test_the_scratch_database_is_never_the_configured_one() -> None:
    name = connection.settings_dict["NAME"]
    expected = "must differ" if connection.vendor == "postgresql" else "PostgreSQL only"
    with pytest.raises(CommandError, match=expected):
        call_command("benchmark", "--scratch-db", str(name), "--only", "enqueue")


def test_the_history_section_runs_on_every_database_the_others_on_postgresql_only() -> None:
    name = connection.settings_dict["NAME"]
    with pytest.raises(CommandError, match="must differ"):
        call_command("benchmark", "--scratch-db", str(name), "--only", "history")
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="on any database, --only history"):
            call_command("benchmark", "--only", "history,enqueue")


@pytest.mark.benchmark_run
def test_history_smoke_run_prunes_only_with_the_setting(tmp_path: Path) -> None:
    """A tiny history run on the configured database's server: every variant measures, and
    only those with retention delete rows (a 1 s age, 6 s of enqueueing)."""
    out = tmp_path / "history.json"
    scratch = (
        str(tmp_path / "history.sqlite3")
        if connection.vendor == "sqlite"
        else f"{connection.settings_dict['NAME']}_history"
    )
    started = time.time()
    call_command(
        "benchmark",
        "--only=history",
        "--runs=1",
        "--minutes=0.1",
        "--rate=200",
        "--history-age=1s",
        "--batches=10",
        "--threads=4",
        f"--scratch-db={scratch}",
        f"--json={out}",
    )
    median = json.loads(out.read_text())["median"]
    assert median["history_database"] == connection.vendor
    for variant in ("paced", "full", "full_plain"):
        assert median[f"history_{variant}_enqueued_per_s"] > 0
        assert median[f"history_{variant}_size_end_mib"] > 0
        assert median[f"history_{variant}_rows_end"] > 0
    assert median["history_full_vs_plain"] > 0
    if connection.vendor == "postgresql":
        assert median["history_autovacuum"] in ("on", "off")
        assert median["history_full_plain_pruned"] == 0
        # The history partitions of a 1 s age are a minute wide (the least a span may be) and
        # go whole once past it: a run within one minute of the clock drops none; one that
        # crosses a minute may drop the minute before (tests/upkeep/test_history_partitions.py
        # drops them, with the timestamps moved).
        if int(started // 60) == int(time.time() // 60):
            assert median["history_paced_pruned"] == 0
            assert median["history_full_pruned"] == 0
        return
    assert median["history_full_plain_pruned"] == 0
    assert median["history_paced_pruned"] > 0
    # At the full drain rate of a loaded machine a 6 s run may end before the lease holder's
    # first round deletes anything (SQLite in CI: 0 pruned, 225 overdue): whether retention
    # keeps pace there is the benchmark's figure, not this smoke test's.
    assert median["history_full_pruned"] >= 0


@pytest.mark.benchmark_run
def test_smoke_run_writes_every_section_figure(tmp_path: Path) -> None:
    """On PostgreSQL a tiny run completes and writes its JSON; elsewhere it refuses clearly."""
    out = tmp_path / "bench.json"
    args = [
        "--jobs=40",
        "--runs=1",
        "--only=enqueue,claim,ceiling,loop,async",
        "--async-jobs=30",
        "--async-concurrency=10",
        "--single-jobs=10",
        "--backlogs=1000,2000",
        "--claim-batch=5",
        "--claim-reps=2",
        "--procs=1",
        "--batches=10",
        "--ceiling-batches=10",
        f"--json={out}",
    ]
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="PostgreSQL only"):
            call_command("benchmark", *args)
        return
    call_command("benchmark", *args)
    document = json.loads(out.read_text())
    median = document["median"]
    for key in (
        "single_per_s",
        "single_prepared_per_s",
        "raw_single_prepared_per_s",
        "bulk_per_s",
        "bulk_args_per_s",
        "django_cursor_single_per_s",
        "statement_single_per_s",
        "raw_bulk_select_per_s",
        "raw_copy_per_s",
        "raw_copy_no_ids_per_s",
        "bulk_1000_per_s",
        "ceiling_p1_per_s",
    ):
        assert median[key] > 0, key
    if importlib.util.find_spec("pgqueuer") is not None:  # the benchmark extra
        assert median["pgqueuer_single_per_s"] > 0
        assert median["bulk_vs_pgqueuer_1000"] > 0
    assert median["loop_p1_b10_per_s"] > 0
    # 30 one-second sleeps, 10 at a time: three waves at least.
    assert median["async_floor_s"] == 3
    assert median["async_drain_s"] >= 3
    # The claim reads the claimable index and fetches its rows by key: no seq scan anywhere.
    assert median["claim_one_queue_2k_scan"] == "Index Scan leasejobs_claimable"
    assert median["claim_one_queue_2k_seq_scan"] is False
    assert median["claim_one_queue_2k_rows_read"] == 5
    # Every queue: a loose index scan lists the queues, the same index is read (without a
    # lock, so from the index alone) per queue, and the rows kept are locked by key.
    assert median["claim_all_queues_2k_seq_scan"] is False
    assert median["claim_all_queues_2k_scan"] == "Index Only Scan leasejobs_claimable"
    assert {row["key"] for row in document["goals"]} >= {
        "bulk_per_s",
        "single_vs_raw",
        "single_vs_django_cursor",
        "bulk_vs_pgqueuer_1000",
        "single_vs_pgqueuer",
        "single_vs_statement",
        "claim_one_queue_growth",
    }


@pytest.mark.benchmark_run
def test_retention_smoke_run_prunes_only_with_the_setting(tmp_path: Path) -> None:
    """A tiny retention run: both drains complete, and only the pruning one deletes old rows."""
    out = tmp_path / "retention.json"
    args = [
        "--jobs=40",
        "--runs=1",
        "--only=retention",
        "--retention-rows=2000",
        "--procs=1",
        "--batches=10",
        "--threads=4",
        f"--json={out}",
    ]
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="PostgreSQL only"):
            call_command("benchmark", *args)
        return
    call_command("benchmark", *args)
    median = json.loads(out.read_text())["median"]
    assert median["retention_p1_plain_per_s"] > 0
    assert median["retention_p1_pruning_per_s"] > 0
    assert median["retention_p1_plain_pruned"] == 0
    # The first maintenance tick of the worker holding the lease prunes a batch at least.
    assert median["retention_p1_pruning_pruned"] >= 500
    assert median["retention_p1_pruning_vs_plain"] > 0


@pytest.mark.benchmark_run
def test_fairness_smoke_run_orders_and_times_every_variant(tmp_path: Path) -> None:
    """A tiny fairness run: the newcomers start right behind the head, the weights share,
    and every cost is measured."""
    out = tmp_path / "fairness.json"
    args = [
        "--runs=1",
        "--only=fairness",
        "--fair-jobs=400",
        "--single-jobs=20",
        "--procs=1",
        "--batches=10",
        "--threads=4",
        f"--json={out}",
    ]
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="PostgreSQL only"):
            call_command("benchmark", *args)
        return
    call_command("benchmark", *args)
    median = json.loads(out.read_text())["median"]
    # 100 newcomers behind the backlog's first job: runs 2 to 101.
    assert median["fair_newcomers_last_run"] == 101
    assert median["fair_heavy_share"] == pytest.approx(2 / 3, abs=0.01)
    for key in (
        "fair_single_vs_plain",
        "fair_bulk_vs_plain",
        "fair_bulk_10_vs_plain",
        "fair_p1_drain_vs_plain",
        "fair_bulk_read_ms",
        "fair_statement_single_vs_plain",
        "fair_given_single_vs_plain",
        "fair_statement_bulk_vs_plain",
        "fair_given_bulk_vs_plain",
    ):
        assert median[key] > 0, key


@pytest.mark.django_db(transaction=True)
def test_fairness_ceiling_replays_the_statements_with_the_place_given() -> None:
    """The ceiling's fair statements are the enqueue's own, less what reads a place: the single
    INSERT's function and the bulk list's read of the keys' lines."""
    if connection.vendor != "postgresql":
        pytest.skip("the fair places are read in these statements on PostgreSQL only")
    from benchmarks import fairness_ceiling
    from testapp import jobs

    single = fairness_ceiling.captured(lambda: jobs.per_account.enqueue("a1", 1))
    bulk = fairness_ceiling.captured(
        lambda: jobs.per_account.enqueue_many([(("a1",), {"n": 1}), (("a2",), {"n": 2})])
    )
    assert any("leasejobs_fair_place" in sql for sql, _ in single)
    assert any("fair_key = g.fair_key" in sql for sql, _ in bulk)
    for statements in (single, bulk):
        kept = fairness_ceiling.given(statements)
        assert not any("leasejobs_fair_place" in sql or "g.fair_key" in sql for sql, _ in kept)
        assert any(sql.lstrip().startswith("INSERT") for sql, _ in kept)
        fairness_ceiling._replay(kept)
    assert Job.objects.filter(fair_key__isnull=False).count() == 6


def test_the_observability_section_mirrors_the_order_of_its_tightest_pair() -> None:
    from benchmarks.observability_drain import mirrored

    order: list[str] = []

    def drain_one(variant: str) -> dict[str, float]:
        order.append(variant)
        return {"per_s": float(len(order))}

    figures = mirrored(drain_one, ["off", "on", "floor"])
    assert order == ["off", "on", "on", "off", "floor"]
    assert figures == {"off": {"per_s": 2.5}, "on": {"per_s": 2.5}, "floor": {"per_s": 5.0}}


@pytest.mark.django_db(transaction=True)
def test_the_logs_bounds_keep_and_write_what_the_logging_job_keeps() -> None:
    """The observability section's bounds on kept logs: the floor's handler keeps the fields a
    job's own logs keep, and the job handing its attempt a row writes the row the logging
    job's capture writes, through the same worker flush."""
    import logging

    from benchmarks.log_floor import KeepFields
    from testapp import jobs

    from django_leasejobs.runtime.worker import Worker

    bench = logging.getLogger("testapp.bench")
    floor, level = KeepFields(), bench.level
    bench.addHandler(floor)
    bench.setLevel(logging.INFO)
    try:
        logged, given = jobs.log_line.enqueue(), jobs.log_row_given.enqueue()
        Worker(queues=None, concurrency=1, poll=0.05, scheduler=False, worker_id="w-b").run(
            burst=True
        )
    finally:
        bench.removeHandler(floor)
        bench.setLevel(level)
    assert floor.last is not None
    assert floor.last[:3] == ("INFO", "testapp.bench", "one line")
    expected = [{"attempt": 1, "level": "INFO", "logger": "testapp.bench", "message": "one line"}]
    for row in (logged, given):
        assert [{k: v for k, v in e.items() if k != "at"} for e in row.logs()] == expected


@pytest.mark.benchmark_run
def test_shards_smoke_run_drains_each_database_and_checks_it(tmp_path: Path) -> None:
    """A tiny shards run: both drains complete, every check is 0, each database holds its
    queue's half, and the second scratch database is dropped afterwards."""
    out = tmp_path / "shards.json"
    args = ["--jobs=40", "--single-jobs=10", "--runs=1", "--only=shards", f"--json={out}"]
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="PostgreSQL only"):
            call_command("benchmark", *args)
        return
    from benchmarks import database
    from benchmarks.database import Target

    call_command("benchmark", *args)
    median = json.loads(out.read_text())["median"]
    assert median["shards_one_per_s"] > 0
    assert median["shards_two_per_s"] > 0
    assert median["shards_two_vs_one"] > 0
    assert (median["shards_one_home_jobs"], median["shards_one_shard_jobs"]) == (40, 0)
    assert (median["shards_two_home_jobs"], median["shards_two_shard_jobs"]) == (20, 20)
    checks = {key: value for key, value in median.items() if key.endswith("_wrong")}
    assert len(checks) == 6
    assert set(checks.values()) == {0}
    for key in ("home", "routed", "no_routes"):
        assert median[f"shards_enqueue_{key}_us"] > 0, key
    assert median["shards_enqueue_routed_vs_home"] > 0
    assert 0 < median["shards_routing_us"] < median["shards_enqueue_routed_us"]
    scratch = Target.from_settings(connection.settings_dict).named(
        f"{connection.settings_dict['NAME']}_bench"
    )
    with scratch.named("postgres").connect() as raw:
        found = raw.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s",
            [database.shard(scratch).name],
        ).fetchone()
    assert found == (0,)


def test_a_check_reports_its_worst_run_not_its_median() -> None:
    """A count of what went wrong shows a single bad run; a rate is the median."""
    from benchmarks import report

    figures = report.medians(
        [
            {"shards_two_misplaced_wrong": 0, "shards_two_per_s": 1.0},
            {"shards_two_misplaced_wrong": 3, "shards_two_per_s": 2.0},
            {"shards_two_misplaced_wrong": 0, "shards_two_per_s": 9.0},
        ]
    )
    assert figures["shards_two_misplaced_wrong"] == 3
    assert figures["shards_two_per_s"] == 2.0
    assert "| shards, two databases: jobs in the other queue's database | 3 |" in report.summary(
        figures, 3
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scale", "100"], "--scale must be at least 20000"),
        (["--scale", "20000", "--scale-runs", "0"], "--scale-runs must be at least 1"),
        (["--scale", "20000", "--prune-rows", "-1"], "--prune-rows must be 0"),
    ],
)
def test_bad_scale_options_are_refused(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("benchmark", *args)


@pytest.mark.benchmark_run
def test_scale_smoke_run_fills_times_every_face_and_prunes(tmp_path: Path, capsys) -> None:
    """A tiny --scale run: filled, every face timed once, pruning measured, reused as asked."""
    from benchmarks import database
    from benchmarks.database import Target

    out = tmp_path / "scale.json"
    name = f"{connection.settings_dict['NAME']}_scale_smoke"
    args = ["--scale=20000", "--scale-runs=1", "--prune-rows=500", f"--scale-db={name}"]
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="PostgreSQL only"):
            call_command("benchmark", *args)
        return
    target = Target.from_settings(connection.settings_dict).named(name)
    try:
        call_command("benchmark", *args, "--explain", f"--json={out}")
        document = json.loads(out.read_text())
        assert document["contents"]["rows_due"] == 2000
        assert document["contents"]["rows_dead"] == 10_000
        faces = document["faces"]
        assert {"stats.collect()", "health view", "checkjobs", "admin job list"} <= set(faces)
        assert all(face["statements"] > 0 for face in faces.values())
        assert document["prune"]["prune_rows"] >= 500
        assert "claims of 100" in capsys.readouterr().out
        call_command("benchmark", *args, "--scale-reuse", "--prune-rows=0")
        assert "reusing" in capsys.readouterr().err
    finally:
        database.drop(target)


@pytest.mark.parametrize(("extra", "max_age"), [({}, 0), ({"BENCHMARK_CONN_MAX_AGE": "60"}, 60)])
def test_benchmark_processes_get_djangos_default_connection_settings(
    extra: dict[str, str], max_age: int
) -> None:
    """As ``startproject`` leaves them, so the figures are a user's; the test project's own
    settings (persistent, checked connections) are left as they are."""
    import os
    import subprocess
    import sys

    from benchmarks.database import MANAGE

    code = (
        "import benchmarks.settings as b, testproject.settings as t; "
        "d = b.DATABASES['default']; "
        "print(d['CONN_MAX_AGE'], d['CONN_HEALTH_CHECKS'], t.DATABASES['default']['CONN_MAX_AGE'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "BENCHMARK_CONN_MAX_AGE"} | extra
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=MANAGE.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [str(max_age), "False", "60"]


def test_the_worker_section_compares_default_settings_with_conn_max_age_60() -> None:
    from benchmarks import report

    runs = [
        {"worker_p2_defaults_per_s": 10_000.0, "worker_p2_defaults_age60_per_s": 10_300.0},
        {"worker_p2_defaults_per_s": 9_000.0, "worker_p2_defaults_age60_per_s": 9_900.0},
        {"worker_p2_defaults_per_s": 11_000.0, "worker_p2_defaults_age60_per_s": 11_000.0},
    ]
    figures = report.medians(runs)
    assert figures["worker_p2_stock_vs_age60"] == pytest.approx(10_300 / 10_000)
    goal = next(g for g in report.goals(figures) if g["key"] == "worker_p2_stock_vs_age60")
    assert (goal["wanted"], goal["met"]) == ("<= 1.05x", True)
    assert "CONN_MAX_AGE = 60" in report.summary(figures, len(runs))


@pytest.mark.benchmark_run
def test_smoke_run_of_the_worker_section(tmp_path: Path) -> None:
    """Every drain of the worker section, the one with CONN_MAX_AGE = 60 included."""
    if connection.vendor != "postgresql":
        pytest.skip("benchmarks run on PostgreSQL only (refusal tested above)")
    out = tmp_path / "bench.json"
    call_command(
        "benchmark",
        "--jobs=40",
        "--runs=1",
        "--only=worker",
        "--procs=1",
        "--batches=10",
        "--threads=2",
        f"--json={out}",
    )
    median = json.loads(out.read_text())["median"]
    for key in (
        "defaults",
        "defaults_age60",
        "defaults_startproject",
        "defaults_queue",
        "defaults_spread",
        "c32",
        "b10_t2",
        "defaults_beside_result",
        "defaults_result",
    ):
        assert median[f"worker_p1_{key}_per_s"] > 0, key
    assert median["worker_p1_result_vs_noop"] == pytest.approx(
        median["worker_p1_defaults_result_per_s"] / median["worker_p1_defaults_beside_result_per_s"]
    )
    assert median["worker_p1_stock_vs_age60"] > 0
    assert median["worker_p1_every_vs_queue"] > 0
    assert median["worker_p1_spread_vs_queue"] > 0


def test_the_worker_section_compares_claim_shapes_and_process_counts() -> None:
    from benchmarks import report

    figures = report.medians(
        [
            {
                "worker_p1_defaults_per_s": 5_000.0,
                "worker_p2_defaults_per_s": 9_500.0,
                "worker_p2_defaults_queue_per_s": 10_000.0,
                "worker_p2_defaults_spread_per_s": 9_000.0,
            }
        ]
    )
    assert figures["worker_p2_every_vs_queue"] == pytest.approx(0.95)
    assert figures["worker_p2_spread_vs_queue"] == pytest.approx(0.9)
    assert figures["worker_defaults_p2_vs_p1"] == pytest.approx(1.9)
    met = {g["key"]: g["met"] for g in report.goals(figures)}
    assert met["worker_p2_every_vs_queue"] is True
    assert met["worker_p2_spread_vs_queue"] is False
    assert met["worker_defaults_p2_vs_p1"] is True
    assert met["worker_defaults_queue_p2_vs_p1"] is None  # not measured


def test_an_unknown_baseline_is_refused_with_gits_message() -> None:
    expected = "not a valid|unknown revision|bad revision"
    if connection.vendor != "postgresql":
        expected = "PostgreSQL only"
    with pytest.raises(CommandError, match=expected):
        call_command("benchmark", "--only=enqueue", "--baseline", "no-such-ref-anywhere")


@pytest.mark.benchmark_run
def test_a_baseline_runs_beside_this_checkout_and_is_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--baseline HEAD``: both sides measured, each in its own database, ratios printed."""
    if connection.vendor != "postgresql":
        pytest.skip("benchmarks run on PostgreSQL only (refusal tested above)")
    out = tmp_path / "bench.json"
    call_command(
        "benchmark",
        "--runs=1",
        "--only=claim",
        "--backlogs=1000,2000",
        "--claim-batch=5",
        "--claim-reps=2",
        "--baseline=HEAD",
        f"--json={out}",
    )
    document = json.loads(out.read_text())
    assert document["baseline"]["ref"] == "HEAD"
    assert document["baseline"]["median"]["claim_one_queue_1k_ms"] > 0
    assert document["median"]["claim_one_queue_1k_ms"] > 0
    printed = capsys.readouterr().out
    assert "| figure | this checkout | HEAD | ratio |" in printed
    assert "| claim_one_queue_1k_ms |" in printed


@pytest.mark.benchmark_run
def test_partitions_smoke_run_drops_the_day_and_deletes_the_rest_in_batches(
    tmp_path: Path,
) -> None:
    """A tiny partitions run: the day's partition holds its rows and goes whole, the other
    rows of the same age go in batches, and both figures are written."""
    out = tmp_path / "partitions.json"
    args = ["--history-rows=300", "--batched-rows=50", "--move-rows=500", "--jobs=40"]
    args += ["--runs=1", "--only=partitions"]
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="PostgreSQL only"):
            call_command("benchmark", *args, f"--json={out}")
        return
    call_command("benchmark", *args, f"--json={out}")
    median = json.loads(out.read_text())["median"]
    assert median["partitions_day_rows"] == 300
    assert median["partitions_dropped"] >= 1
    assert median["partitions_batched_rows"] == 50
    assert median["partitions_drop_s"] > 0
    assert median["partitions_batched_rows_per_s"] > 0
    assert median["partitions_moved"] == 500
    assert median["partitions_drain_moving_vs_alone"] > 0
