"""A primary killed with ``kill -9`` and its synchronous standby promoted: the workers carry on.

PostgreSQL only. The test makes its own pair of servers (initdb, pg_basebackup -R) on free
ports in a temporary directory, as the ``postgres`` OS user when it runs as root (initdb
refuses root), and removes them afterwards whatever happened. Workers and the test reach them
through libpq's multi-host string (``testproject.failover_settings``). Time is the
database's: retries come due by moving ``run_at``, never by waiting.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Min
from testapp import jobs

from django_leasejobs.models import DeadLetter, Job, Status

from ..conftest import shifted
from ..invariants import check_invariants, wait_for
from .conftest import FAST, MANAGE, ROOT, WorkerProcess, wait_started

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
]

SETTINGS = "testproject.failover_settings"
RESUME_WITHIN = 30.0
"""Seconds from the promotion to the first job a worker finishes on the new primary."""


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL fault: a primary killed and its standby promoted")


def server_binaries() -> Path | None:
    """The newest installed PostgreSQL server's bin directory (``LEASEJOBS_PG_BIN`` first)."""
    if os.environ.get("LEASEJOBS_PG_BIN"):
        return Path(os.environ["LEASEJOBS_PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def as_server_user(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: as root, run them as ``postgres``."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Server:
    """One PostgreSQL cluster of the pair: its data directory, port and log."""

    bindir: Path
    data: Path
    port: int
    orphans: list[int] = field(default_factory=list)
    """The killed postmaster's children, killed at cleanup if they have not exited."""

    def run(self, tool: str, *args: str) -> None:
        argv = as_server_user([str(self.bindir / tool), *args])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, f"{tool} {args}: {done.stdout}{done.stderr}"

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", f"{self.data}.log", "-w", "start")

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        )

    def postmaster(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def kill(self) -> None:
        """``kill -9`` the postmaster, as a crash would; its backends see it gone and exit."""
        pid = self.postmaster()
        self.orphans = [
            int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == pid
        ]
        os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(AssertionError):
                self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        for pid in self.orphans:
            with contextlib.suppress(OSError):  # gone already
                if b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)


def _parent(proc: Path) -> int | None:
    try:
        # The command's name may hold spaces and parentheses: the fields after the last ")".
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class Pair:
    primary: Server
    standby: Server

    @property
    def ports(self) -> str:
        return f"{self.primary.port},{self.standby.port}"


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A primary and a synchronous standby streaming from it through a replication slot."""
    bindir = server_binaries()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (set LEASEJOBS_PG_BIN)")
    top = Path(tempfile.mkdtemp(prefix="leasejobs-failover-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(top, user.pw_uid, user.pw_gid)
    primary_port, standby_port = free_ports(2)
    primary = Server(bindir, top / "primary", primary_port)
    standby = Server(bindir, top / "standby", standby_port)
    try:
        primary.run("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust", "-N")
        with (primary.data / "postgresql.conf").open("a") as conf:
            # fsync off: a killed process loses nothing the kernel has; only a machine crash
            # would, and this test does not crash the machine.
            conf.write(
                f"port = {primary.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{top}'\nwal_level = replica\n"
                "max_wal_senders = 4\n"
                "fsync = off\nshared_buffers = 16MB\nmax_connections = 40\n"
            )
        primary.start()
        with primary.connect() as conn:
            conn.execute("CREATE DATABASE leasejobs")
        source = ("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres")
        # A standby (-R) streaming through a new slot (-C -S), copied after an immediate
        # checkpoint (-c fast: the default spread one takes minutes).
        options = ("-R", "-X", "stream", "-C", "-S", "standby", "-N", "-c", "fast")
        primary.run("pg_basebackup", *source, "-D", str(standby.data), *options)
        with (standby.data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {standby.port}\n")
        standby.start()
        with primary.connect() as conn:
            # Synchronous from now on; set after the copy, so that the promoted standby does
            # not wait for a standby of its own.
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            conn.execute("SELECT pg_reload_conf()")
            wait_for(
                lambda: conn.execute(
                    "SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'"
                ).fetchone(),
                what="the standby streaming synchronously",
            )
        yield Pair(primary, standby)
    finally:
        try:
            for server in (standby, primary):
                server.remove()
        finally:
            shutil.rmtree(top, ignore_errors=True)


@contextlib.contextmanager
def on_the_pair(pair: Pair, django_db_blocker: Any) -> Iterator[None]:
    """This process's ORM on the pair, with the workers' settings, until the block ends."""
    settings_module = importlib.import_module(SETTINGS)
    wrapper = connections[DEFAULT_DB_ALIAS]
    saved = wrapper.settings_dict
    wrapper.close()
    wrapper.settings_dict = {**saved, **settings_module.pair_database(pair.ports)}
    try:
        with django_db_blocker.unblock():
            yield
    finally:
        wrapper.close()
        wrapper.settings_dict = saved


def migrate() -> None:
    done = subprocess.run(
        [sys.executable, str(MANAGE), "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def database_now() -> dt.datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        now: dt.datetime = cursor.fetchone()[0]
        return now


def listening() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%'")
        count: int = cursor.fetchone()[0]
        return count


def succeeded(ids: list[int]) -> int:
    return Job.objects.filter(pk__in=ids, status=Status.SUCCEEDED).count()


def all_succeeded_moving_retries(ids: list[int]) -> bool:
    """True when every job succeeded; meanwhile a retry (an attempt that met the outage) is
    made due now instead of waiting for its backoff."""
    Job.objects.filter(pk__in=ids, status=Status.FAILED).update(run_at=shifted(-1))
    return succeeded(ids) == len(ids)


def test_primary_killed_and_standby_promoted_workers_resume_and_no_job_is_lost(
    pair: Pair,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
    django_db_blocker: Any,
) -> None:
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", SETTINGS)
    monkeypatch.setenv("LEASEJOBS_FAILOVER_PORTS", pair.ports)
    migrate()
    with on_the_pair(pair, django_db_blocker):
        ids = [j.pk for j in jobs.sleep.enqueue_many([((0.1,), {"label": "before"})] * 300)]
        workers = [spawn("--concurrency", "2", *FAST, name=name) for name in ("a", "b")]
        servers = f"127.0.0.1:{pair.primary.port},127.0.0.1:{pair.standby.port}"
        for worker in workers:
            wait_started(worker)
            assert f"leasejobs on {servers})" in worker.log()  # the banner names both
        wait_for(lambda: succeeded(ids) >= 60, what="work under way")
        # Acknowledged one by one up to the kill (each commit waited for the standby), async
        # handlers among them, so that both kinds are in flight at the kill.
        for _ in range(10):
            ids.append(jobs.sleep.enqueue(0.1, label="acked").pk)
            ids.append(jobs.async_sleep.enqueue(0.5, label="acked-async").pk)
        in_flight = Job.objects.filter(status=Status.RUNNING).count()
        connection.close()

        pair.primary.kill()
        # A failover slower than the workers' backoff: promoted once they try every 5 s.
        for worker in workers:
            wait_for(lambda w=worker: "retry_in=5.00" in w.log(), what="the backoff at its cap")
        pair.standby.run("pg_ctl", "-D", str(pair.standby.data), "-w", "promote")
        promoted = time.monotonic()
        promoted_at = database_now()  # the new primary's clock: finished_at is written by it
        # The leases taken before the kill have run out (moved, not waited for, as they would
        # through a failover longer than their 2 s). Each job is then finished by its worker,
        # whose heartbeat came first, or reclaimed by recovery and its old token refused.
        expired = Job.objects.filter(status=Status.RUNNING).update(lease_expires_at=shifted(-1))

        # Each worker finishes a job on the new primary, the same process as before the kill.
        after = Job.objects.filter(finished_at__gt=promoted_at)
        resumed_in = []
        for worker in workers:
            own = after.filter(finished_by=worker.worker_id)
            wait_for(own.exists, timeout=RESUME_WITHIN + 15, what="a job finished after promotion")
            first = own.aggregate(first=Min("finished_at"))["first"]
            resumed_in.append((first - promoted_at).total_seconds())
            assert worker.alive(), worker.log()
        assert max(resumed_in) < RESUME_WITHIN, resumed_in
        # Each worker's LISTEN connection is open on the new primary too.
        wait_for(lambda: listening() == len(workers), what="both listeners back")

        # Enqueued through the same multi-host settings: they reach the new primary and run.
        later = [j.pk for j in jobs.sleep.enqueue_many([((0.01,), {"label": "after"})] * 5)]
        wait_for(
            lambda: all_succeeded_moving_retries(ids + later),
            timeout=60,
            what="every job succeeded",
        )
        drained_in = time.monotonic() - promoted

        rows = check_invariants(ids + later, expected_count=len(ids) + len(later))
        assert {row.status for row in rows} == {Status.SUCCEEDED}
        assert DeadLetter.objects.count() == 0
        for worker in workers:
            assert worker.alive(), worker.log()  # the same processes, never restarted
            assert "worker.database_error" in worker.log()  # it did meet the outage
            assert "notify.listen_restored" in worker.log()  # LISTEN failed, then came back
            # No thread died, and none logged an error it did not expect.
            assert "Exception in thread" not in worker.log(), worker.log()
            assert "Traceback" not in worker.log(), worker.log()
        for worker in workers:
            worker.send(signal.SIGTERM)
            assert worker.wait() == 0, worker.log()
        reclaimed = sum(1 for row in rows if any(e["kind"] == "lease expired" for e in row.errors))
        refused = sum(int(n) for w in workers for n in re.findall(r" stale=(\d+)", w.log()))
        print(
            f"\nfailover: {len(ids)} jobs acknowledged before the kill, 0 lost, 0 dead; "
            f"{in_flight} in flight at the kill, {expired} leases expired at the promotion, "
            f"{reclaimed} reclaimed, {refused} stale writes refused; each worker finished a job "
            f"{max(resumed_in):.2f} s after the promotion, all done in {drained_in:.2f} s"
        )
