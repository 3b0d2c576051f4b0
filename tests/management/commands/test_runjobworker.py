"""``manage.py runjobworker``: options reach the worker, bad values are refused clearly."""

from __future__ import annotations

import io
import logging
import os
import signal
import socket
import sys
import threading
import urllib.error
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from testapp import jobs

from django_leasejobs import metrics, protocol
from django_leasejobs.models import Job, Status
from django_leasejobs.runtime.completions import Completer

from ...exporter import NOTHING, free_port, leftovers, listening, scrape
from ...invariants import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FAST = ["--lease", "5", "--heartbeat", "0.1", "--poll", "0.05"]


def run(*argv: str) -> str:
    out = io.StringIO()
    call_command("runjobworker", *argv, stdout=out)
    return out.getvalue()


def outcomes(output: str) -> dict[str, str]:
    """The summary table's first rows (outcome -> jobs), wherever the banner leaves it."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() == ["outcome", "jobs"])
    return dict(line.split() for line in lines[start + 1 : start + 6])


def test_burst_without_queues_runs_every_queue_and_prints_a_summary() -> None:
    default = jobs.noop.enqueue_many([((), {})] * 3)
    other = jobs.other_queue.enqueue()
    output = run("--burst", *FAST)
    assert Job.objects.filter(pk__in=[j.pk for j in default], status=Status.SUCCEEDED).count() == 3
    assert Job.objects.get(pk=other.pk).status == Status.SUCCEEDED
    assert outcomes(output) == {
        "succeeded": "4",
        "retried": "0",
        "dead": "0",
        "stale": "0",
        "released": "0",
    }
    assert "queues:    every queue\n" in output
    assert "not serve" not in output


def test_queues_restricts_and_the_summary_names_the_due_jobs_left_behind(make_due) -> None:
    jobs.noop.enqueue()
    others = jobs.other_queue.enqueue_many([((), {})] * 3)
    later = jobs.other_queue.enqueue(queue="reports", delay=3600)  # not due: not named
    make_due(*others)
    output = run("--burst", "--queues", "default", *FAST)
    assert outcomes(output)["succeeded"] == "1"
    assert set(Job.objects.exclude(queue="default").values_list("status", flat=True)) == {
        Status.PENDING
    }
    assert "queues:    default\n" in output
    assert output.endswith("3 jobs due in queues this worker does not serve: other (3)\n")
    assert later.queue not in output.split("not serve")[-1]


def test_the_declared_queues_are_the_default(settings) -> None:
    default, other = jobs.noop.enqueue(), jobs.other_queue.enqueue()
    settings.LEASEJOBS_QUEUES = ["default"]
    output = run("--burst", *FAST)
    assert Job.objects.get(pk=default.pk).status == Status.SUCCEEDED
    assert Job.objects.get(pk=other.pk).status == Status.PENDING
    assert "queues:    default\n" in output
    assert output.endswith("1 job due in queues this worker does not serve: other (1)\n")


def test_star_takes_every_queue_and_options_reach_the_worker() -> None:
    a, b = jobs.noop.enqueue(), jobs.other_queue.enqueue()
    output = run(
        "--burst",
        "--queues",
        "*",
        "--concurrency",
        "2",
        "--batch",
        "1",
        "--worker-id",
        "named-worker",
        "--no-scheduler",
        "--grace",
        "0",
        *FAST,
    )
    assert set(Job.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)) == {
        Status.SUCCEEDED
    }
    assert "worker named-worker:" in output


def test_async_concurrency_reaches_the_worker(caplog) -> None:
    added = jobs.async_add.enqueue(4, 5)
    with caplog.at_level(logging.INFO, logger="django_leasejobs"):
        run("--burst", "--async-concurrency", "3", "--concurrency", "1", *FAST)
    assert "async_concurrency=3 batch=100 " in caplog.text
    assert Job.objects.get(pk=added.pk).result == 9


def test_max_jobs_exits_after_that_many() -> None:
    jobs.noop.enqueue_many([((), {})] * 5)
    run("--max-jobs", "2", "--concurrency", "1", *FAST)
    assert Job.objects.filter(status=Status.SUCCEEDED).count() == 2
    assert Job.objects.filter(status=Status.PENDING).count() == 3


def test_signal_handlers_are_restored_after_the_run() -> None:
    before = signal.getsignal(signal.SIGTERM)
    run("--burst", *FAST)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--heartbeat", "5", "--lease", "5"], "heartbeat (5 s) must be shorter than the lease"),
        (["--heartbeat", "30", "--lease", "10"], "must be shorter than the lease (10 s)"),
        (["--concurrency", "0"], "concurrency must be a positive integer, not 0"),
        (["--concurrency", "-3"], "concurrency must be a positive integer"),
        (["--concurrency", "two"], "invalid int value: 'two'"),
        (["--async-concurrency", "0"], "async_concurrency must be a positive integer, not 0"),
        (["--async-concurrency", "-2"], "async_concurrency must be a positive integer"),
        (["--async-concurrency", "many"], "invalid int value: 'many'"),
        (["--batch", "-1"], "batch must be a positive integer"),
        (["--lease", "-1"], "lease must be a positive number"),
        (["--lease", "nan"], "lease must be a positive number"),
        (["--poll", "0"], "poll must be a positive number"),
        (["--max-jobs", "-5"], "max_jobs must be a positive integer"),
        (["--max-stuck", "0"], "max_stuck must be a positive integer, not 0"),
        (["--max-stuck", "-1"], "max_stuck must be a positive integer, not -1"),
        (["--max-stuck", "one"], "invalid int value: 'one'"),
        (["--grace", "-1"], "grace must be a number of seconds >= 0"),
        (["--queues", ""], "--queues needs comma-separated queue names"),
        (["--queues", "a,,b"], "--queues needs comma-separated queue names"),
        (["--worker-id", ""], "worker_id must be a non-empty string"),
        (["--metrics-port", "http"], "invalid int value: 'http'"),
        (["--metrics-port", "9.5"], "invalid int value: '9.5'"),
        (["--metrics-port", "0"], "--metrics-port must be a port number from 1 to 65535, not 0"),
        (["--metrics-port", "65536"], "from 1 to 65535, not 65536"),
        (["--metrics-port", "-80"], "from 1 to 65535, not -80"),
        (["--metrics-addr", "127.0.0.1"], "--metrics-addr needs --metrics-port"),
    ],
)
def test_bad_values_are_a_command_error_with_a_clear_message(argv, message) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run("--burst", *argv)


def test_queues_outside_a_declared_leasejobs_queues_are_refused(settings) -> None:
    settings.LEASEJOBS_QUEUES = ["default", "other"]
    with pytest.raises(CommandError, match=r"--queues names emials, not in LEASEJOBS_QUEUES"):
        run("--burst", "--queues", "default,emials", *FAST)
    job = jobs.other_queue.enqueue()
    run("--burst", "--queues", "other", *FAST)
    assert Job.objects.get(pk=job.pk).status == Status.SUCCEEDED


# --------------------------------------------------------------------------- --metrics-port


@pytest.fixture
def counters() -> Iterator[None]:
    """Whatever a failing test left installed in the process must not reach the next test."""
    yield
    metrics.uninstall()


SUCCEEDED = ("leasejobs_jobs_succeeded_total", "default")
LOCAL = ["--metrics-addr", "127.0.0.1", *FAST]


def run_and_scrape_mid_run(port: int) -> tuple[dict[tuple[str, str], float], str]:
    """Run a --burst worker with --metrics-port on a thread; scrape it while it runs.

    It gets two no-op jobs and one that keeps it running until a gate job (on a queue it does
    not take) is final, so the scrape sees the two successes while the server is up. Returns
    that scrape and the command's output, once the command has returned.
    """
    gate = jobs.other_queue.enqueue()
    jobs.noop.enqueue_many([((), {})] * 2)
    jobs.wait_until_final.enqueue([gate.pk])
    output: list[str] = []

    def work() -> None:
        try:
            output.append(
                run("--burst", "--queues", "default", "--metrics-port", str(port), *LOCAL)
            )
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:

        def two_succeeded() -> dict[tuple[str, str], float] | None:
            try:
                samples = scrape(port)
            except urllib.error.URLError:  # the server is not up yet
                return None
            return samples if samples.get(SUCCEEDED, 0) >= 2 else None

        samples = wait_for(two_succeeded, timeout=30, what="two successes on /metrics")
        assert thread.is_alive(), "scraped the worker while it runs"
    finally:
        protocol.cancel(gate.pk)
        thread.join(timeout=30)
    assert not thread.is_alive(), "the worker did not finish"
    return samples, output[0]


def test_metrics_port_serves_each_runs_own_counters_and_leaves_nothing_behind(counters) -> None:
    port = free_port()
    for run_number in (1, 2):
        samples, output = run_and_scrape_mid_run(port)
        counted = {
            name: value
            for (name, queue), value in samples.items()
            if name.startswith("leasejobs_") and name.endswith("_total")
        }
        # This run's claims and successes only: not the enqueues made before it started, and
        # not the first run's jobs added to the second's.
        assert counted == {
            "leasejobs_jobs_started_total": 3,
            "leasejobs_jobs_succeeded_total": 2,
        }, f"run {run_number}"
        # Counters only: the gauges (the pending gate would show in leasejobs_jobs_pending) are
        # the metrics view's job, so a worker's scrape runs no query.
        assert not any(name == "leasejobs_jobs_pending" for name, _ in samples)
        assert outcomes(output)["succeeded"] == "3"
        # The command took its server and its counters down on the way out: the port is free
        # for the next run, and the process's later state changes are counted by nobody.
        with pytest.raises(urllib.error.URLError):
            scrape(port)
        assert leftovers() == NOTHING, f"after run {run_number}"


def raise_in_the_loop(completer: Completer) -> None:
    raise RuntimeError("a bug in the worker loop")


@pytest.mark.parametrize(
    ("failure", "error", "message"),
    [
        pytest.param("schedules", CommandError, "LEASEJOBS_SCHEDULES: ", id="invalid-schedules"),
        pytest.param("loop", RuntimeError, "a bug in the worker loop", id="exception-in-loop"),
    ],
)
def test_a_failing_worker_takes_its_metrics_down(
    failure, error, message, counters, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    if failure == "schedules":  # Worker.run raises ScheduleError before its loop starts
        settings.LEASEJOBS_SCHEDULES = {"broken": {"job": jobs.noop.name, "cron": "61 * * * *"}}
    else:  # an exception out of the loop itself, after the server and the counters started
        monkeypatch.setattr(Completer, "flush", raise_in_the_loop)
    jobs.noop.enqueue()
    port = free_port()
    with pytest.raises(error, match=message):
        run("--burst", "--metrics-port", str(port), *LOCAL)
    with pytest.raises(urllib.error.URLError):
        scrape(port)
    assert leftovers() == NOTHING


def test_a_worker_stopped_by_sigterm_takes_its_metrics_down(counters) -> None:
    # Not --burst: only the signal (caught by this main thread's handler) ends the run.
    job = jobs.terminate_worker.enqueue()
    port = free_port()
    run("--metrics-port", str(port), *LOCAL)
    assert Job.objects.get(pk=job.pk).status == Status.SUCCEEDED
    with pytest.raises(urllib.error.URLError):
        scrape(port)
    assert leftovers() == NOTHING


def test_a_metrics_port_in_use_is_a_command_error_and_nothing_starts(counters) -> None:
    job = jobs.noop.enqueue()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            CommandError, match=rf"--metrics-port {port}: cannot listen on 127\.0\.0\.1:{port}"
        ):
            run("--burst", "--metrics-port", str(port), *LOCAL)
    assert Job.objects.get(pk=job.pk).status == Status.PENDING
    assert leftovers() == NOTHING


def listening_during_a_run(port: int, *options: str) -> set[str]:
    """Where a --burst worker with --metrics-port listens, seen in the kernel while it runs."""
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("reads the listening sockets from Linux's /proc/net/tcp")
    gate = jobs.other_queue.enqueue()  # keeps the worker running until it is final
    jobs.wait_until_final.enqueue([gate.pk])

    def work() -> None:
        try:
            run("--burst", "--queues", "default", "--metrics-port", str(port), *options, *FAST)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        return wait_for(lambda: listening(port), timeout=30, what="the metrics server")
    finally:
        protocol.cancel(gate.pk)
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not finish"


@pytest.mark.parametrize(
    ("options", "addresses"),
    [
        pytest.param((), {"127.0.0.1"}, id="default-this-machine-only"),
        pytest.param(("--metrics-addr", "0.0.0.0"), {"0.0.0.0"}, id="every-interface-when-told"),
    ],
)
def test_metrics_listen_on_this_machine_only_unless_told(counters, options, addresses) -> None:
    """The counters are no one else's business unless asked: a pod's scraper needs 0.0.0.0."""
    assert listening_during_a_run(free_port(), *options) == addresses


def test_a_metrics_addr_not_on_this_host_is_a_command_error() -> None:
    port = free_port()
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never a local address, and no DNS lookup.
    with pytest.raises(CommandError, match=rf"cannot listen on 192\.0\.2\.1:{port}: "):
        run("--burst", "--metrics-port", str(port), "--metrics-addr", "192.0.2.1")


def test_metrics_port_without_prometheus_client_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = jobs.noop.enqueue()
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import now raises ImportError
    with pytest.raises(
        CommandError, match=r"--metrics-port: .*pip install 'django-leasejobs\[metrics\]'"
    ):
        run("--burst", "--metrics-port", str(free_port()), *FAST)
    assert Job.objects.get(pk=job.pk).status == Status.PENDING
