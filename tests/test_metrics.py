"""The optional Prometheus exporter: gauges from the database, counters from the signals."""

from __future__ import annotations

import sys
import urllib.error
from collections.abc import Iterator

import prometheus_client
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families
from testapp import jobs

from django_leasejobs import metrics, protocol
from django_leasejobs.runtime import execution

from .conftest import worker_row
from .exporter import NOTHING, free_port, leftovers, scrape
from .test_views import TOKEN, user_client

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("monitoring_token"),
]

METRICS = "/jobs/metrics/"


@pytest.fixture
def monitoring_token() -> Iterator[None]:
    with override_settings(LEASEJOBS_MONITORING_TOKEN=TOKEN):
        yield


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


def test_the_live_workers_and_their_stuck_handlers_are_totals(installed) -> None:
    assert prometheus_client.REGISTRY.get_sample_value("leasejobs_workers") == 0
    worker_row("live-a", stuck=2)
    worker_row("live-b", stuck=1)
    worker_row("lost-c", seconds_ago=600, stuck=5)
    assert prometheus_client.REGISTRY.get_sample_value("leasejobs_workers") == 2
    assert prometheus_client.REGISTRY.get_sample_value("leasejobs_stuck_handlers") == 3


def test_counters_follow_the_state_changes(
    installed, django_capture_on_commit_callbacks, all_due
) -> None:
    before = {
        event: sample(f"leasejobs_jobs_{event}_total", "count")
        for event in ("enqueued", "started", "succeeded", "retried", "dead", "cancelled")
    }
    with django_capture_on_commit_callbacks(execute=True):
        jobs.noop.enqueue(queue="count")
        jobs.permanent.enqueue(queue="count")
        jobs.flaky.enqueue(succeed_on=2, queue="count")
        later = jobs.noop.enqueue(queue="count", delay=3600)
        assert protocol.cancel(later.pk)
    for _ in range(2):
        # The retry's run_at is now + 0 s with microseconds; SQLite's claim compares with a
        # millisecond clock, so within the same millisecond it is not yet due: move it back.
        all_due()
        with django_capture_on_commit_callbacks(execute=True):
            for job in protocol.claim("w1", queues=["count"], batch=10):
                execution.run(job, "w1")
    after = {event: sample(f"leasejobs_jobs_{event}_total", "count") for event in before}
    assert {event: after[event] - before[event] for event in before} == {
        "enqueued": 4,
        "started": 4,  # flaky runs twice
        "succeeded": 2,
        "retried": 1,
        "dead": 1,
        "cancelled": 1,
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


def test_serve_listens_on_this_machine_only_unless_told() -> None:
    port = free_port()
    with metrics.serve(port) as exporter:
        assert exporter.server.server_address[0] == "127.0.0.1"
        assert scrape(port)  # answers on the loopback address
    with metrics.serve(port, "0.0.0.0") as exporter:
        assert exporter.server.server_address[0] == "0.0.0.0"
    assert leftovers() == NOTHING


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
        response = client.get("/jobs/metrics/", **bearer(TOKEN))
    finally:
        metrics.uninstall()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert 'leasejobs_jobs_due{queue="default"} 1.0' in text
    assert "# TYPE leasejobs_jobs_enqueued_total counter" in text


# --------------------------------------------------------------------------- who may scrape


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_anonymous_and_plain_users_are_refused(client: Client, make_due) -> None:
    make_due(jobs.noop.enqueue(queue="payroll"), seconds_ago=5)
    response = client.get(METRICS)
    assert response.status_code == 403
    assert "LEASEJOBS_MONITORING_TOKEN" in response.json()["error"]
    assert b"leasejobs_" not in response.content
    plain = user_client("plain", is_staff=True, may_view_jobs=False)
    assert plain.get(METRICS).status_code == 403
    assert leftovers() == NOTHING


def test_staff_who_may_view_jobs_may_scrape(make_due) -> None:
    make_due(jobs.noop.enqueue(queue="payroll"), seconds_ago=5)
    looker = user_client("looker", is_staff=True, may_view_jobs=True)
    response = looker.get(METRICS)
    assert response.status_code == 200
    assert 'leasejobs_jobs_due{queue="payroll"} 1.0' in response.content.decode()


@pytest.mark.parametrize("configured", [TOKEN, None], ids=["token-set", "no-token-set"])
def test_a_wrong_token_gets_401(client: Client, configured: str | None) -> None:
    with override_settings(LEASEJOBS_MONITORING_TOKEN=configured):
        for wrong in (TOKEN[:-1], "", "None"):
            response = client.get(METRICS, **bearer(wrong))
            assert response.status_code == 401
            assert response["WWW-Authenticate"] == 'Bearer error="invalid_token"'
            assert b"leasejobs_" not in response.content


@pytest.fixture
def someone_elses() -> Iterator[prometheus_client.Counter]:
    """A metric of another library, in prometheus_client's default registry."""
    counter = prometheus_client.Counter("someone_elses_requests", "Not ours.")
    counter.inc()
    yield counter
    prometheus_client.REGISTRY.unregister(counter)


def test_the_view_exports_only_its_own_metrics_and_leaves_nothing_behind(
    client: Client, someone_elses, make_due
) -> None:
    make_due(jobs.noop.enqueue(), seconds_ago=5)
    before = dict(prometheus_client.REGISTRY._collector_to_names)
    for _ in range(2):  # the second request finds nothing the first one left
        response = client.get(METRICS, **bearer(TOKEN))
        assert response.status_code == 200
        names = {family.name for family in text_string_to_metric_families(response.text)}
        assert all(name.startswith("leasejobs_") for name in names), names
        assert "leasejobs_jobs_due" in names
        assert "someone_elses_requests" not in response.text
        assert dict(prometheus_client.REGISTRY._collector_to_names) == before
        assert leftovers() == NOTHING


@override_settings(LEASEJOBS_METRICS=True)
def test_the_view_shows_the_counters_of_a_counting_process(
    client: Client, django_capture_on_commit_callbacks
) -> None:
    metrics.install_if_enabled()
    try:
        with django_capture_on_commit_callbacks(execute=True):
            jobs.noop.enqueue(queue="counted")
        text = client.get(METRICS, **bearer(TOKEN)).content.decode()
    finally:
        metrics.uninstall()
    assert 'leasejobs_jobs_enqueued_total{queue="counted"} 1.0' in text
    assert "leasejobs_jobs_due" in text


@pytest.fixture
def without_prometheus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import now raises ImportError


def test_a_missing_prometheus_client_is_a_clear_error(without_prometheus, client: Client) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"pip install 'django-leasejobs\[metrics\]'"):
        metrics.install()
    response = client.get(METRICS, **bearer(TOKEN))
    assert response.status_code == 501
    assert response.json() == {
        "status": "error",
        "error": "django-leasejobs metrics need prometheus-client: "
        "pip install 'django-leasejobs[metrics]'.",
    }
    assert client.get(METRICS).status_code == 403  # a stranger learns nothing either way


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


def value(metric: str, **labels: str) -> float:
    return prometheus_client.REGISTRY.get_sample_value(metric, labels) or 0.0


@pytest.mark.django_db(transaction=True)
def test_the_workers_claims_durations_and_lost_leases_are_exported(installed) -> None:
    """What the OpenTelemetry metrics say of a worker, Prometheus says too (its signals)."""
    from django.db.models import F

    from django_leasejobs.models import Job
    from django_leasejobs.runtime.worker import Worker

    from .runtime.test_worker_parts import Parts

    ran = {"queue": "measured", "name": jobs.noop.name, "outcome": "succeeded"}
    failed = {"queue": "measured", "name": jobs.permanent.name, "outcome": "failed"}
    before = (
        value("leasejobs_job_duration_seconds_count", **ran),
        value("leasejobs_job_duration_seconds_count", **failed),
        value("leasejobs_claim_size_sum", queues="measured"),
    )
    jobs.noop.enqueue_many([{"queue": "measured"}] * 3)
    jobs.permanent.enqueue(queue="measured")
    worker = Worker(queues=["measured"], batch=10, poll=0.05, scheduler=False)
    assert worker.run(burst=True).claimed == 4
    assert value("leasejobs_job_duration_seconds_count", **ran) - before[0] == 3
    assert value("leasejobs_job_duration_seconds_count", **failed) - before[1] == 1
    assert value("leasejobs_claim_size_sum", queues="measured") - before[2] == 4
    assert value("leasejobs_claim_duration_seconds_count", queues="measured") >= 1

    lost = {"queue": "default", "detected_by": "heartbeat"}
    before_lost = value("leasejobs_leases_lost_total", **lost)
    jobs.noop.enqueue()
    parts = Parts()
    (slot,) = parts.claim()
    Job.objects.filter(pk=slot.job.pk).update(attempt=F("attempt") + 1)  # another's now
    parts.heartbeat().beat()
    assert value("leasejobs_leases_lost_total", **lost) - before_lost == 1
