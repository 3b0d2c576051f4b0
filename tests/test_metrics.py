"""The optional Prometheus exporter: gauges from the database, counters from the signals."""

from __future__ import annotations

import sys
import urllib.error
from collections.abc import Iterator

import prometheus_client
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from testapp import jobs

from django_leasejobs import execution, lifecycle, metrics

from .exporter import NOTHING, free_port, leftovers, scrape

pytestmark = pytest.mark.django_db


@pytest.fixture
def installed() -> Iterator[None]:
    metrics.install()
    yield
    metrics.uninstall()


def sample(name: str, queue: str) -> float:
    return prometheus_client.REGISTRY.get_sample_value(name, {"queue": queue}) or 0.0


def test_gauges_are_the_stats_per_queue(installed, make_due) -> None:
    make_due(jobs.noop.enqueue(queue="mail"), seconds_ago=90)
    jobs.noop.enqueue(queue="mail", delay=3600)
    assert sample("leasejobs_jobs_pending", "mail") == 2
    assert sample("leasejobs_jobs_due", "mail") == 1
    assert 90 <= sample("leasejobs_oldest_due_age_seconds", "mail") < 150
    assert sample("leasejobs_expired_leases", "mail") == 0


def test_counters_follow_the_state_changes(
    installed, django_capture_on_commit_callbacks, all_due
) -> None:
    before = {
        event: sample(f"leasejobs_jobs_{event}_total", "count")
        for event in ("enqueued", "started", "succeeded", "retried", "dead")
    }
    with django_capture_on_commit_callbacks(execute=True):
        jobs.noop.enqueue(queue="count")
        jobs.permanent.enqueue(queue="count")
        jobs.flaky.enqueue(succeed_on=2, queue="count")
    for _ in range(2):
        # The retry's run_at is now + 0 s with microseconds; SQLite's claim compares with a
        # millisecond clock, so within the same millisecond it is not yet due: move it back.
        all_due()
        with django_capture_on_commit_callbacks(execute=True):
            for job in lifecycle.claim("w1", queues=["count"], batch=10):
                execution.run(job, "w1")
    after = {event: sample(f"leasejobs_jobs_{event}_total", "count") for event in before}
    assert {event: after[event] - before[event] for event in before} == {
        "enqueued": 3,
        "started": 4,  # flaky runs twice
        "succeeded": 2,
        "retried": 1,
        "dead": 1,
    }


def test_install_is_idempotent_and_uninstall_removes_everything() -> None:
    metrics.install(with_stats=False)
    metrics.install()
    metrics.install()
    names = set(prometheus_client.REGISTRY._names_to_collectors)
    assert {"leasejobs_jobs_succeeded_total", "leasejobs_jobs_due"} <= names
    metrics.uninstall()
    names = set(prometheus_client.REGISTRY._names_to_collectors)
    assert not {name for name in names if name.startswith("leasejobs_")}


def test_serve_counts_until_the_last_exporter_closes(django_capture_on_commit_callbacks) -> None:
    first_port, second_port = free_port(), free_port()
    first = metrics.serve(first_port, "127.0.0.1")
    second = metrics.serve(second_port, "127.0.0.1")
    try:
        first.close()
        with django_capture_on_commit_callbacks(execute=True):
            jobs.noop.enqueue(queue="held")
        # Two workers embedded in one process: the one still running keeps counting.
        assert scrape(second_port)[("leasejobs_jobs_enqueued_total", "held")] == 1
    finally:
        second.close()
    second.close()  # closing again (a caller's finally after a with block) is harmless
    assert leftovers() == NOTHING
    assert not first.thread.is_alive()
    assert not second.thread.is_alive()
    for port in (first_port, second_port):
        with pytest.raises(urllib.error.URLError):
            scrape(port)


@override_settings(LEASEJOBS_METRICS=True)
def test_counters_of_the_whole_process_outlive_an_exporter(
    django_capture_on_commit_callbacks,
) -> None:
    metrics.install_if_enabled()
    try:
        with (
            metrics.serve(free_port(), "127.0.0.1"),
            django_capture_on_commit_callbacks(execute=True),
        ):
            jobs.noop.enqueue(queue="kept")
        with django_capture_on_commit_callbacks(execute=True):
            jobs.noop.enqueue(queue="kept")
        assert sample("leasejobs_jobs_enqueued_total", "kept") == 2
    finally:
        metrics.uninstall()


def test_the_metrics_view_renders_the_text_format(client: Client, make_due) -> None:
    make_due(jobs.noop.enqueue(), seconds_ago=5)
    try:
        response = client.get("/jobs/metrics/")
    finally:
        metrics.uninstall()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert 'leasejobs_jobs_due{queue="default"} 1.0' in text
    assert "# TYPE leasejobs_jobs_enqueued_total counter" in text


@pytest.fixture
def without_prometheus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import now raises ImportError


def test_a_missing_prometheus_client_is_a_clear_error(without_prometheus, client: Client) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"pip install 'django-leasejobs\[metrics\]'"):
        metrics.install()
    with pytest.raises(ImproperlyConfigured, match="need prometheus-client"):
        client.get("/jobs/metrics/")


@override_settings(LEASEJOBS_METRICS=True)
def test_start_up_with_metrics_on_but_no_client_is_left_to_the_checks(without_prometheus) -> None:
    metrics.install_if_enabled()  # does not raise: leasejobs.E008 reports it


@override_settings(LEASEJOBS_METRICS=True)
def test_start_up_with_metrics_on_installs_the_counters() -> None:
    metrics.install_if_enabled()
    try:
        names = set(prometheus_client.REGISTRY._names_to_collectors)
        assert "leasejobs_jobs_started_total" in names
        assert "leasejobs_jobs_due" not in names  # gauges are the metrics view's job
    finally:
        metrics.uninstall()
