"""The worker's connections under Django's default settings (``CONN_MAX_AGE = 0``, no health
checks), as ``django-admin startproject`` writes them.

The worker runs in-process against the real database. A probe job records, from its pool
thread, which DB-API connection it ran on (and on PostgreSQL and MariaDB the server's id of
that connection), so the tests count connections, not time. Idle and check thresholds are
set on the worker's keeper rather than waited for.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections, transaction
from django.db.backends.signals import connection_created

from django_leasejobs import job
from django_leasejobs.models import FINAL, Job, Status
from django_leasejobs.runtime.connection_keeper import CHECK_AFTER, CLOSE_AFTER, ConnectionKeeper
from django_leasejobs.runtime.worker import Worker

from ..invariants import check_invariants, wait_for
from .test_worker import FAST, Background

pytestmark = pytest.mark.django_db(transaction=True)

BACKEND_ID = {
    "postgresql": "SELECT pg_backend_pid()",
    "mysql": "SELECT CONNECTION_ID()",
    "sqlite": "SELECT 1",
}


@dataclass(frozen=True)
class Seen:
    label: str
    thread: str
    dbapi: Any
    """The DB-API connection object itself (kept alive here, so ``is`` compares safely)."""
    backend: int


SEEN: list[Seen] = []


@job(max_attempts=1)
def probe(label: str) -> None:
    """One query on this thread's connection; records which connection that was."""
    with connection.cursor() as cursor:
        cursor.execute(BACKEND_ID[connection.vendor])
        backend = cursor.fetchone()[0]
    SEEN.append(Seen(label, threading.current_thread().name, connection.connection, backend))


@job(max_attempts=1)
async def async_probe(label: str) -> None:
    """The same, in the thread where the async ORM's calls run."""
    await sync_to_async(probe.func, thread_sensitive=True)(label)


def seen(label: str) -> Seen:
    return next(s for s in SEEN if s.label == label)


@pytest.fixture(autouse=True)
def stock_settings(request) -> Iterator[None]:
    """Django's defaults for the test database (``CONN_MAX_AGE`` and health checks as
    parametrized, else 0 and off), restored afterwards; the probe's records emptied."""
    max_age, checks = getattr(request, "param", (0, False))
    shared = connection.settings_dict  # the dict every thread's connection is made from
    before = (shared["CONN_MAX_AGE"], shared["CONN_HEALTH_CHECKS"])
    shared["CONN_MAX_AGE"], shared["CONN_HEALTH_CHECKS"] = max_age, checks
    connection.close()  # reopened under these settings
    SEEN.clear()
    try:
        yield
    finally:
        shared["CONN_MAX_AGE"], shared["CONN_HEALTH_CHECKS"] = before
        connection.close()
        SEEN.clear()


@pytest.fixture
def opened() -> Iterator[Counter[str]]:
    """Connections opened while the test runs, by the name of the thread that opened them."""
    counts: Counter[str] = Counter()

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        counts[threading.current_thread().name] += 1

    connection_created.connect(count, weak=False)
    try:
        yield counts
    finally:
        connection_created.disconnect(count)


def finished(label: str) -> str:
    job_row = Job.objects.filter(name=probe.name, args=[label]).values("status").first()
    return job_row["status"] if job_row and job_row["status"] in FINAL else ""


def run_probe(label: str) -> Seen:
    """Enqueue a probe for a running worker and wait until it ended; it must have succeeded at
    its first attempt."""
    probe.enqueue(label)
    wait_for(lambda: finished(label), what=f"probe {label}")
    row = Job.objects.filter(name=probe.name, args=[label]).values("status", "attempt").get()
    assert row == {"status": Status.SUCCEEDED, "attempt": 1}
    return seen(label)


def kill(backend: int) -> None:
    """End one server connection, as an administrator, a failover or a restart would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_terminate_backend(%s, 10000)", [backend])  # waits for it
        else:
            cursor.execute("KILL CONNECTION %s", [backend])


class TestKeptBetweenJobs:
    def test_with_conn_max_age_0_each_thread_runs_every_job_on_one_connection(
        self, opened: Counter[str]
    ) -> None:
        jobs = probe.enqueue_many([((f"j{i}",), {}) for i in range(60)])
        summary = Worker(concurrency=3, **FAST, scheduler=False).run(burst=True)
        assert summary.succeeded == 60
        # Every thread, the claim loop's included, opened one connection at most...
        assert opened
        assert max(opened.values()) == 1, opened
        # ... and each pool thread ran all its jobs on that one.
        by_thread: dict[str, set[int]] = {}
        for s in SEEN:
            by_thread.setdefault(s.thread, set()).add(id(s.dbapi))
        assert [len(ids) for ids in by_thread.values()] == [1] * len(by_thread)
        if connection.vendor != "sqlite":
            assert len({s.backend for s in SEEN}) == len(by_thread)
        check_invariants([j.pk for j in jobs])

    def test_async_handlers_run_on_one_connection_in_the_orm_thread(self) -> None:
        """One at a time, so the first job's tidy comes before the second job's query."""
        async_probe.enqueue_many([((f"a{i}",), {}) for i in range(5)])
        worker = Worker(concurrency=1, async_concurrency=1, **FAST, scheduler=False)
        assert worker.run(burst=True).succeeded == 5
        assert len({s.thread for s in SEEN}) == 1
        assert len({id(s.dbapi) for s in SEEN}) == 1

    @pytest.mark.parametrize("stock_settings", [(0, False), (None, False)], indirect=True)
    def test_a_thread_idle_for_close_after_closes_its_connection(self) -> None:
        """Whatever ``CONN_MAX_AGE`` says: ``None`` (for ever) too."""
        worker = Worker(concurrency=1, **FAST, scheduler=False)
        worker.connection_keeper.close_after = 0.0  # idle as soon as the queue is empty
        with Background(worker):
            first = run_probe("first")
            second = run_probe("second")
        assert second.thread == first.thread
        assert second.dbapi is not first.dbapi

    def test_a_thread_not_idle_that_long_keeps_its_connection(self) -> None:
        worker = Worker(concurrency=1, **FAST, scheduler=False)
        assert worker.connection_keeper.close_after == CLOSE_AFTER
        with Background(worker):
            first = run_probe("first")
            second = run_probe("second")
        assert second.thread == first.thread
        assert second.dbapi is first.dbapi


class TestBrokenConnections:
    @pytest.mark.parametrize("stock_settings", [(0, False), (None, False)], indirect=True)
    def test_a_connection_killed_between_jobs_is_replaced_before_the_next_job(self) -> None:
        if connection.vendor == "sqlite":
            pytest.skip("SQLite has no server connection to end")
        worker = Worker(concurrency=1, **FAST, scheduler=False)
        worker.connection_keeper.check_after = 0.0  # every reuse counts as after idle time
        with Background(worker):
            first = run_probe("first")
            kill(first.backend)
            second = run_probe("second")  # succeeded at attempt 1: never saw the dead one
            third = run_probe("third")
        assert second.backend != first.backend
        assert third.dbapi is second.dbapi


class TestKeeper:
    """The keeper's rules, on the test's own connection."""

    def test_conn_max_age_0_is_kept_and_left_as_django_set_it(self) -> None:
        keeper = ConnectionKeeper()
        connection.ensure_connection()
        dbapi, close_at = connection.connection, connection.close_at
        keeper.tidy()
        assert connection.connection is dbapi
        assert connection.close_at == close_at  # Django's own rule still applies outside
        connection.close_if_unusable_or_obsolete()
        assert connection.connection is None

    @pytest.mark.parametrize("stock_settings", [(30, False)], indirect=True)
    def test_a_positive_conn_max_age_still_ends_a_connection(self) -> None:
        keeper = ConnectionKeeper()
        connection.ensure_connection()
        dbapi = connection.connection
        keeper.tidy()
        assert connection.connection is dbapi
        connection.close_at = time.monotonic() - 1  # as if it had been open 30 s
        keeper.tidy()
        assert connection.connection is None

    def test_a_connection_is_checked_before_reuse_only_after_check_after(self) -> None:
        assert ConnectionKeeper().check_after == CHECK_AFTER
        keeper = ConnectionKeeper(check_after=3600.0)
        connection.ensure_connection()
        keeper.tidy()  # first sight: checked before its next query
        assert connection.health_check_enabled
        assert not connection.health_check_done
        keeper.tidy()  # seen just now: not checked
        assert not connection.health_check_enabled
        keeper.check_after = 0.0
        keeper.tidy()
        assert connection.health_check_enabled
        assert not connection.health_check_done

    def test_a_connection_inside_a_transaction_is_left_alone(self) -> None:
        keeper = ConnectionKeeper(close_after=0.0)
        with transaction.atomic():
            dbapi = connection.connection
            keeper.tidy()
            keeper.close_if_idle()
            assert connection.connection is dbapi

    def test_close_if_idle_closes_only_connections_idle_that_long(self) -> None:
        keeper = ConnectionKeeper()
        connection.ensure_connection()
        keeper.tidy()
        keeper.close_if_idle()
        assert connection.connection is not None
        keeper.close_after = 0.0
        keeper.close_if_idle()
        assert connection.connection is None
        assert not any(c.connection is not None for c in connections.all(initialized_only=True))

    def test_a_connection_opened_after_the_thread_was_listed_is_tidied(self) -> None:
        """The keeper lists a thread's connection objects once: the one a handler opens later
        is that same object, so it is tidied at once (here: left outside autocommit)."""
        keeper = ConnectionKeeper(check_after=3600.0)
        connection.close()
        keeper.tidy()  # lists the thread's connections while none is open
        connection.ensure_connection()
        connection.set_autocommit(False)  # a handler's leftover: Django closes such a one
        keeper.tidy()
        assert connection.connection is None

    def test_a_connection_object_replaced_is_tidied_once_listed_again(self) -> None:
        keeper = ConnectionKeeper(check_after=3600.0)
        keeper.tidy()
        original = connections[connection.alias]
        replacement = connections.create_connection(connection.alias)
        connections[connection.alias] = replacement
        try:
            replacement.ensure_connection()
            replacement.set_autocommit(False)
            keeper.check_after = 0.0  # the list is read again after check_after
            keeper.tidy()
            assert replacement.connection is None
        finally:
            replacement.close()
            connections[connection.alias] = original
