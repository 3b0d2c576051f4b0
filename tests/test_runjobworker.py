"""``manage.py runjobworker``: options reach the worker, bad values are refused clearly."""

from __future__ import annotations

import io
import signal

import pytest
from django.core.management import CommandError, call_command
from testapp import jobs

from django_leasejobs.models import Job, Status

pytestmark = pytest.mark.django_db(transaction=True)

FAST = ["--lease", "5", "--heartbeat", "0.1", "--poll", "0.05"]


def run(*argv: str) -> str:
    out = io.StringIO()
    call_command("runjobworker", *argv, stdout=out)
    return out.getvalue()


def test_burst_runs_the_default_queue_and_prints_a_summary() -> None:
    default = jobs.noop.enqueue_many([((), {})] * 3)
    other = jobs.other_queue.enqueue()
    output = run("--burst", *FAST)
    assert Job.objects.filter(pk__in=[j.pk for j in default], status=Status.SUCCEEDED).count() == 3
    assert Job.objects.get(pk=other.pk).status == Status.PENDING
    lines = dict(line.split() for line in output.splitlines()[1:6])
    assert lines == {"succeeded": "3", "retried": "0", "dead": "0", "stale": "0", "released": "0"}


def test_default_queue_comes_from_the_setting(settings) -> None:
    settings.LEASEJOBS_DEFAULT_QUEUE = "other"
    other = jobs.other_queue.enqueue()
    run("--burst", *FAST)
    assert Job.objects.get(pk=other.pk).status == Status.SUCCEEDED


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
        (["--batch", "-1"], "batch must be a positive integer"),
        (["--lease", "-1"], "lease must be a positive number"),
        (["--lease", "nan"], "lease must be a positive number"),
        (["--poll", "0"], "poll must be a positive number"),
        (["--max-jobs", "-5"], "max_jobs must be a positive integer"),
        (["--grace", "-1"], "grace must be a number of seconds >= 0"),
        (["--queues", ""], "--queues needs comma-separated queue names"),
        (["--queues", "a,,b"], "--queues needs comma-separated queue names"),
        (["--worker-id", ""], "worker_id must be a non-empty string"),
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
