"""Prometheus exporter: queue gauges read from the database, counters of state changes.

Optional: needs the ``metrics`` extra (``pip install 'django-leasejobs[metrics]'``, which brings
prometheus-client). prometheus-client is imported only when a function here is called, and a
missing package raises ``ImproperlyConfigured`` saying what to install.

Two kinds of numbers, because they live in different places:

* **Gauges** (``leasejobs_jobs_due{queue="mail"}``, ``leasejobs_oldest_due_age_seconds`` ...)
  are the numbers of :func:`django_leasejobs.stats.collect`, read from the database at scrape
  time. Any one process can export them for the whole system; the ``metrics`` view does.
* **Counters** (``leasejobs_jobs_succeeded_total{queue="mail"}`` ...) count the state changes
  *this process* made, from the signals in :mod:`django_leasejobs.db.signals`, beside the
  worker's measurements (:data:`MEASURES`: its claims, its handlers' durations, its lost
  leases), fed by the worker's own signals there. Workers make most of
  them, so each worker exports its own (``serve(port)``), and Prometheus sums them.

The counters are installed for good by :func:`install` (``LEASEJOBS_METRICS``), or only for as
long as an :class:`Exporter` of :func:`serve` is open: a worker run inside a process that lives
on must not leave receivers counting that process's later state changes into the next run's
numbers. The metrics view installs nothing: :func:`render` builds a registry of this app's
metrics alone for each scrape (:func:`app_registry`), never the process's default registry,
which holds whatever else the process registered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from django.core.exceptions import ImproperlyConfigured

from .core.conf import settings
from .db import signals
from .reports import shards

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

logger = logging.getLogger("django_leasejobs")

GAUGES = (
    ("pending", "leasejobs_jobs_pending", "Pending jobs, due or not."),
    ("due", "leasejobs_jobs_due", "Pending and failed jobs whose run_at has come."),
    ("running", "leasejobs_jobs_running", "Jobs leased to a worker."),
    ("failed", "leasejobs_jobs_failed", "Jobs waiting for a retry."),
    ("expired_leases", "leasejobs_expired_leases", "Running jobs whose lease ran out."),
    ("dead_last_hour", "leasejobs_dead_letters_last_hour", "Dead letters of the last hour."),
    ("dead_last_day", "leasejobs_dead_letters_last_day", "Dead letters of the last day."),
    (
        "oldest_due_age",
        "leasejobs_oldest_due_age_seconds",
        "Seconds since the oldest due job became due (0 when none).",
    ),
)

WORKER_GAUGES = (
    ("leasejobs_workers", "Workers seen within their lease (the table of live workers)."),
    (
        "leasejobs_stuck_handlers",
        "Handlers still running after their attempt was ended (timeout or cancel), over the "
        "live workers.",
    ),
)
"""Totals without a label: worker ids change at every start, a label per id would pile up."""

COUNTERS = (
    ("enqueued", signals.job_enqueued, "Jobs enqueued by this process."),
    ("started", signals.job_started, "Jobs claimed by this process."),
    ("succeeded", signals.job_succeeded, "Jobs this process completed."),
    ("retried", signals.job_retried, "Failed attempts this process scheduled for a retry."),
    ("dead", signals.job_dead, "Jobs this process dead-lettered."),
    ("cancelled", signals.job_cancelled, "Jobs this process cancelled."),
)

SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
SIZES = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class Measure(NamedTuple):
    """A worker's measurement exported beside the counters, fed by its signal: a histogram
    observing the keyword ``value``, or a counter (``value`` None) counting each sending."""

    name: str
    signal: Any
    documentation: str
    labels: tuple[str, ...]
    value: str | None = None
    buckets: tuple[float, ...] = ()


MEASURES = (
    Measure(
        "leasejobs_job_duration_seconds",
        signals.job_processed,
        "Seconds each attempt's handler ran in this process, by outcome.",
        ("queue", "name", "outcome"),
        "seconds",
        SECONDS,
    ),
    Measure(
        "leasejobs_claim_duration_seconds",
        signals.jobs_claimed,
        "Seconds each claim of this process's worker took.",
        ("queues",),
        "seconds",
        SECONDS,
    ),
    Measure(
        "leasejobs_claim_size",
        signals.jobs_claimed,
        "Jobs each claim of this process's worker took.",
        ("queues",),
        "size",
        SIZES,
    ),
    Measure(
        "leasejobs_leases_lost",
        signals.lease_lost,
        "Leases this process's worker learnt it lost: at a heartbeat, or by a refused write.",
        ("queue", "detected_by"),
    ),
)
"""What the OpenTelemetry metrics say of claims, attempts and lost leases, for Prometheus."""

_lock = threading.Lock()
_counters: dict[str, Any] = {}
_stats_collector: StatsCollector | None = None
_installed = False
"""``install()`` was called: the counters stay until ``uninstall()``, whatever exporters do."""
_exporters = 0
"""Open exporters: the last one to close takes the counters down unless they are installed."""


def client() -> Any:
    """The prometheus_client module, or a clear error saying how to get it."""
    try:
        import prometheus_client
    except ImportError as exc:
        raise ImproperlyConfigured(
            "django-leasejobs metrics need prometheus-client: "
            "pip install 'django-leasejobs[metrics]'."
        ) from exc
    return prometheus_client


class StatsCollector:
    """A Prometheus collector that reads the queue gauges from the database at each scrape."""

    def describe(self) -> Iterator[Any]:
        # Declared without samples so that registering the collector runs no query.
        yield from self._families()

    def collect(self) -> Iterator[Any]:
        # Every queue database's (shards): a queue lives in one, workers are summed. A
        # database that cannot be read fails the scrape, as with one database.
        readings = shards.read_each(probe=False, lag=False)
        for reading in readings:
            if reading.error is not None:
                raise reading.error
        results = [reading.stats for reading in readings if reading.stats is not None]
        families = list(self._families())
        queues = shards.merged_queues(readings)
        for (field, _, _), family in zip(GAUGES, families[: len(GAUGES)], strict=True):
            for queue, numbers in queues.items():
                family.add_metric([queue], float(getattr(numbers, field)))
        workers, stuck = families[len(GAUGES) :]
        live = sum(1 for result in results for w in result.workers if not w.lost)
        workers.add_metric([], float(live))
        stuck.add_metric([], float(sum(result.stuck for result in results)))
        yield from families

    @staticmethod
    def _families() -> Iterator[Any]:
        client()  # a clear error if prometheus-client is missing
        from prometheus_client.core import GaugeMetricFamily as gauge_family

        for _, name, documentation in GAUGES:
            yield gauge_family(name, documentation, labels=["queue"])
        for name, documentation in WORKER_GAUGES:
            yield gauge_family(name, documentation, labels=[])


def install(*, with_stats: bool = True) -> None:
    """Register the counters (and, with ``with_stats``, the gauges) in the default registry.

    Idempotent. The counters start counting at the first call, so call it at start-up in every
    process that should count (``LEASEJOBS_METRICS = True`` does it in ``AppConfig.ready``).
    They then count for the life of the process: closing an exporter leaves them alone.
    """
    global _installed, _stats_collector
    prometheus = client()
    with _lock:
        _installed = True
        _connect_counters(prometheus)
        if with_stats and _stats_collector is None:
            collector = StatsCollector()
            prometheus.REGISTRY.register(collector)
            _stats_collector = collector


def _connect_counters(prometheus: Any) -> None:
    """Under ``_lock``: one set of counters per process, however many want them."""
    if _counters:
        return
    for event, signal, documentation in COUNTERS:
        counter = prometheus.Counter(f"leasejobs_jobs_{event}", documentation, labelnames=["queue"])
        _counters[event] = counter
        signal.connect(_receiver(counter), weak=False, dispatch_uid=f"leasejobs-{event}")
    for measure in MEASURES:
        if measure.value is None:
            metric = prometheus.Counter(measure.name, measure.documentation, measure.labels)
        else:
            metric = prometheus.Histogram(
                measure.name, measure.documentation, measure.labels, buckets=measure.buckets
            )
        _counters[measure.name] = metric
        measure.signal.connect(
            _measured(metric, measure), weak=False, dispatch_uid=f"leasejobs-{measure.name}"
        )


def _disconnect_counters(prometheus: Any) -> None:
    """Under ``_lock``. A signal with no receiver costs a state change nothing (see
    ``signals.wanted``), and a registry without the names lets the next run register afresh."""
    for event, signal, _ in COUNTERS:
        signal.disconnect(dispatch_uid=f"leasejobs-{event}")
    for measure in MEASURES:
        measure.signal.disconnect(dispatch_uid=f"leasejobs-{measure.name}")
    for counter in _counters.values():
        prometheus.REGISTRY.unregister(counter)
    _counters.clear()


def _receiver(counter: Any) -> Any:
    def count(sender: Any, **kwargs: Any) -> None:
        job = kwargs.get("job")
        queue = job.queue if job is not None else kwargs.get("queue", "")
        counter.labels(queue=queue).inc()

    return count


def _measured(metric: Any, measure: Measure) -> Any:
    def observe(sender: Any, **kwargs: Any) -> None:
        labelled = metric.labels(*(kwargs[label] for label in measure.labels))
        if measure.value is None:
            labelled.inc()
        else:
            labelled.observe(kwargs[measure.value])

    return observe


def install_if_enabled() -> None:
    """``AppConfig.ready``: start counting when ``LEASEJOBS_METRICS`` is on.

    A bad setting or a missing prometheus-client is left to the system checks (leasejobs.E001,
    leasejobs.E008), which report it with the others instead of crashing the start-up here.
    """
    try:
        enabled = settings.METRICS
        if enabled:
            install(with_stats=False)
    except ImproperlyConfigured:
        return


class CountersCollector:
    """The state-change counters while this process counts, else their families, empty.

    Empty families (no samples) keep the exposition's shape the same whether or not this
    process counts: a dashboard sees the metric names and no values instead of nothing.
    """

    def describe(self) -> Iterator[Any]:
        yield from self._empty()

    def collect(self) -> Iterator[Any]:
        with _lock:
            counters = list(_counters.values())
        if not counters:
            yield from self._empty()
        for counter in counters:
            yield from counter.collect()

    @staticmethod
    def _empty() -> Iterator[Any]:
        client()
        from prometheus_client.core import CounterMetricFamily as counter_family
        from prometheus_client.core import HistogramMetricFamily as histogram_family

        for event, _, documentation in COUNTERS:
            yield counter_family(f"leasejobs_jobs_{event}", documentation, labels=["queue"])
        for measure in MEASURES:
            family = counter_family if measure.value is None else histogram_family
            yield family(measure.name, measure.documentation, labels=list(measure.labels))


def app_registry() -> Any:
    """A new registry holding this app's metrics only: the gauges and the counters.

    Built per scrape and dropped after it, so serving the view changes nothing in the process
    (no receiver connected, nothing added to the default registry) and exports nothing that
    another library registered there.
    """
    prometheus = client()
    registry = prometheus.CollectorRegistry(auto_describe=True)
    registry.register(StatsCollector())
    registry.register(CountersCollector())
    return registry


def render() -> tuple[bytes, str]:
    """This app's metrics (:func:`app_registry`) in the text format, and its content type."""
    prometheus = client()
    return prometheus.generate_latest(app_registry()), prometheus.CONTENT_TYPE_LATEST


class Exporter:
    """A metrics server started by :func:`serve`, and its hold on the counters.

    ``close()`` (or leaving a ``with`` block) stops the server, frees the port and, when no other
    exporter is open and :func:`install` was not called, disconnects and unregisters the
    counters. A process that runs a worker and lives on (``call_command``, an application that
    embeds and later stops its worker) is then as it was before the worker started, and its
    next worker counts from zero, as a restarted worker process would (Prometheus reads the new
    ``_created`` time as a counter reset).
    """

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self.server = server
        self.thread = thread
        self._closed = False

    def close(self) -> None:
        """Idempotent, so that a caller's ``finally`` may close an exporter a ``with`` closed."""
        with _lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join()
        finally:
            _release()

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve(port: int, addr: str = "127.0.0.1") -> Exporter:
    """Export this process's counters on ``http://addr:port/metrics`` (for worker processes);
    on this machine only unless ``addr`` says otherwise (``"0.0.0.0"``: every interface).

    The gauges are left to the web process's ``metrics`` view, so that N workers do not run
    the stats queries N times per scrape. The server answers from a daemon thread until the
    returned :class:`Exporter` is closed. A failed bind (port in use, unknown address) raises
    its ``OSError`` with nothing left behind.
    """
    global _exporters
    prometheus = client()
    with _lock:
        _connect_counters(prometheus)
        _exporters += 1
    try:
        server, thread = prometheus.start_http_server(port, addr)
    except BaseException:
        _release()
        raise
    logger.info("metrics.serving addr=%s port=%s", addr, port)
    return Exporter(server, thread)


def _release() -> None:
    """An exporter is done with the counters: the last one out takes them down."""
    global _exporters
    with _lock:
        _exporters -= 1
        if not _exporters and not _installed:
            _disconnect_counters(client())


def uninstall() -> None:
    """Undo :func:`install` (for tests): disconnect the counters and unregister everything."""
    global _installed, _stats_collector
    prometheus = client()
    with _lock:
        _installed = False
        _disconnect_counters(prometheus)
        if _stats_collector is not None:
            prometheus.REGISTRY.unregister(_stats_collector)
            _stats_collector = None
