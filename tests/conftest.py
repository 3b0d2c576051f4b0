"""Shared fixtures. Time is controlled by moving timestamps in the database, never by sleeping."""

from __future__ import annotations

import datetime as dt
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import ExpressionWrapper, F, Value
from django.db.models.fields import DateTimeField
from django.db.models.functions import Now
from hypothesis import HealthCheck, settings

from django_leasejobs.models import Job

# Hypothesis profiles, chosen by LEASEJOBS_HYPOTHESIS_PROFILE. Loaded here, before any test
# module is imported: a test's own settings(...) inherits what it does not set from the profile
# loaded when it is created, and schemathesis' tests inherit it the same way.
# - ci (the default, and what .ci/run's passes set): the same examples on every run and machine
#   (derandomize: seeded from each test's source; no example database to replay). A plain
#   `.venv/bin/pytest` is derandomized too, so a contributor's run and CI's agree and a red run
#   is red again when re-run; searching for new failures is the fuzz pass's job.
# - fuzz (`bash .ci/run fuzz`): randomized, FUZZ_SCALE times the examples; a failure is kept in
#   .hypothesis/ and tried first on the next fuzz run. Pin what it finds with @example (or, for
#   the API fuzz, a plain test of the request) so every later ci run checks it.
# Both: no deadline and no too_slow health check, which time the test on a shared machine
# rather than check it; print_blob, so a failure prints the @reproduce_failure that replays it.
FUZZ_SCALE = 10
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    derandomize=False,
    max_examples=100 * FUZZ_SCALE,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
HYPOTHESIS_PROFILE = os.environ.get("LEASEJOBS_HYPOTHESIS_PROFILE", "ci")
settings.load_profile(HYPOTHESIS_PROFILE)


def examples(count: int) -> int:
    """A test's own ``max_examples``: ``count`` (what ci runs), FUZZ_SCALE times that in fuzz."""
    return count * FUZZ_SCALE if HYPOTHESIS_PROFILE == "fuzz" else count


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every Hypothesis test must carry the ``fuzz`` mark, which the fuzz pass selects by:
    an unmarked one would never be searched with the fuzz profile."""
    for item in items:
        function = getattr(item, "function", None)
        if getattr(function, "is_hypothesis_test", False) and not item.get_closest_marker("fuzz"):
            raise pytest.UsageError(
                f"{item.nodeid} is a Hypothesis test without @pytest.mark.fuzz: mark it, so "
                "that `bash .ci/run fuzz` runs it"
            )


def shifted(seconds: float) -> ExpressionWrapper:
    """The database's now plus ``seconds`` (negative for the past)."""
    return ExpressionWrapper(
        Now() + Value(dt.timedelta(seconds=seconds)), output_field=DateTimeField()
    )


def take_over(job_id: int, worker_id: str = "second-worker") -> Job:
    """Another worker takes a running job over between two of its worker's heartbeats: the
    lease expires, is recovered and the job claimed again, in one transaction so no heartbeat
    lands between. The heartbeat's UPDATE may deadlock with it on MariaDB (InnoDB's index
    locks): the whole transaction is then tried again, as the app's own writes are
    (``db.deadlocks.retry_deadlocks``)."""
    from django.db import OperationalError, transaction

    from django_leasejobs import protocol
    from django_leasejobs.db.deadlocks import is_deadlock

    for _ in range(10):
        try:
            with transaction.atomic():
                Job.objects.filter(pk=job_id).update(lease_expires_at=shifted(-1))
                protocol.recover_expired()
                Job.objects.filter(pk=job_id).update(run_at=shifted(-1))
                (taken,) = protocol.claim(worker_id, batch=1, lease_seconds=60)
            return taken
        except OperationalError as exc:
            if not is_deadlock(exc):
                raise
    raise AssertionError(f"job {job_id} could not be taken over: deadlocked ten times")


@pytest.fixture
def make_due() -> Callable[..., None]:
    """Move jobs' run_at into the past, as if their time had come."""

    def move(*jobs: Job | int, seconds_ago: float = 1) -> None:
        ids = [j if isinstance(j, int) else j.pk for j in jobs]
        Job.objects.filter(pk__in=ids).update(run_at=shifted(-seconds_ago))

    return move


@pytest.fixture
def expire_lease() -> Callable[..., None]:
    """Move running jobs' lease expiry into the past, as if their worker had stopped."""

    def move(*jobs: Job | int, seconds_ago: float = 1) -> None:
        ids = [j if isinstance(j, int) else j.pk for j in jobs]
        Job.objects.filter(pk__in=ids).update(lease_expires_at=shifted(-seconds_ago))

    return move


@pytest.fixture
def vendor() -> str:
    return connection.vendor


def fields(job_id: int, *names: str) -> dict[str, Any]:
    return Job.objects.filter(pk=job_id).values(*names).get()


@pytest.fixture
def all_due() -> Iterator[Callable[[], None]]:
    """Make every pending/failed job due now."""

    def move() -> None:
        Job.objects.filter(status__in=["pending", "failed"]).update(
            run_at=ExpressionWrapper(
                F("created_at") - Value(dt.timedelta(days=1)), output_field=DateTimeField()
            )
        )

    return move


def race(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released together; return their results (or raise their errors)."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = call()
        except BaseException as exc:  # re-raised in the main thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def kill_own_connection() -> Iterator[Callable[[], None]]:
    """Terminate this test's database connection from the server side, as a failover would."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server connection to terminate")
    killer = connections.create_connection("default")

    def kill() -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_backend_pid()")
            else:
                cursor.execute("SELECT CONNECTION_ID()")
            own_id = cursor.fetchone()[0]
        with killer.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_terminate_backend(%s)", [own_id])
            else:
                cursor.execute(f"KILL CONNECTION {int(own_id)}")

    try:
        yield kill
    finally:
        killer.close()
        connection.close()


def worker_row(worker_id: str, *, seconds_ago: float = 0, **changes: Any) -> None:
    """A worker's row as its heartbeat writes it, last seen ``seconds_ago`` (by moving rows)."""
    from django_leasejobs import upkeep
    from django_leasejobs.models import Worker

    values: dict[str, Any] = {
        "worker_id": worker_id,
        "host": "host-a",
        "pid": 4321,
        "queues": "default,mail",
        "version": "1.2.3",
        "concurrency": 4,
        "async_concurrency": 100,
        "lease_seconds": 60.0,
        "running": 2,
        "stuck": 0,
    }
    upkeep.beat(upkeep.Beat(**{**values, **changes}))
    if seconds_ago:
        Worker.objects.filter(worker_id=worker_id).update(
            started_at=shifted(-seconds_ago), last_seen_at=shifted(-seconds_ago)
        )


LATE_JOBS = "tests.late_jobs"
"""A module of jobs outside every installed app that nothing imports at start."""


@pytest.fixture
def late_jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``tests.late_jobs`` not imported yet, the registry restored after the test.

    The module's jobs register when something imports it (a worker, for a row, once
    ``LEASEJOBS_TASK_MODULES`` lists it); afterwards it is forgotten again, so every test that
    uses this meets it unimported.
    """
    from django_leasejobs.core import registry

    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))
    monkeypatch.setattr(registry, "_duplicates", set(registry._duplicates))
    forget_module(LATE_JOBS)
    yield LATE_JOBS
    forget_module(LATE_JOBS)


def forget_module(name: str) -> None:
    """As if ``name`` had never been imported: the next import runs its top level again."""
    sys.modules.pop(name, None)
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        # ``from . import child`` would find the old module here without importing it.
        vars(sys.modules[parent]).pop(child, None)


@pytest.fixture
def spans() -> Iterator[Any]:
    """The spans this test records with OpenTelemetry's SDK (``tests/spans.py``)."""
    from .spans import recorded

    spans = recorded()
    spans.clear()
    spans.sampler.on = True
    try:
        yield spans
    finally:
        spans.sampler.on = False
        spans.clear()


@pytest.fixture
def measurements() -> Any:
    """OpenTelemetry metrics this test records, with the SDK (``tests/spans.py``)."""
    from .spans import measured

    measurements = measured()
    measurements.read()  # what earlier tests recorded
    return measurements
