"""Real ``runjobworker`` subprocesses against the pytest-django test database.

Each worker is ``python testproject/manage.py runjobworker ...`` with ``DATABASE_URL`` pointing at
the test database (on SQLite: the test file named in settings TEST; on PostgreSQL: the
``test_<name>`` database), its log in a file, and a name of our choosing so the test can find
its leases. Every process is killed at the end of the test.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from ..invariants import wait_for

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "testproject" / "manage.py"

FAST = ["--lease", "2", "--heartbeat", "0.5", "--poll", "0.1", "--no-scheduler"]
"""Short leases so faults show quickly; tests still move timestamps instead of waiting."""


def database_url(application_name: str) -> str:
    """The URL of the database the test process uses now (the test database)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    if connection.vendor == "postgresql":
        auth = quote(s["USER"] or "")
        if s.get("PASSWORD"):
            auth += ":" + quote(s["PASSWORD"])
        host = f"{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}"
        return f"postgres://{auth}@{host}/{s['NAME']}?application_name={application_name}"
    if connection.vendor == "mysql":
        auth = quote(s["USER"] or "")
        if s.get("PASSWORD"):
            auth += ":" + quote(s["PASSWORD"])
        host = f"{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 3306}"
        return f"mysql://{auth}@{host}/{s['NAME']}"
    raise NotImplementedError(f"acceptance tests do not support {connection.vendor}")


@dataclass
class WorkerProcess:
    """One ``runjobworker`` subprocess."""

    worker_id: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for exit (the timeout only bounds a hang) and return the exit status."""
        return self.process.wait(timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start workers: ``spawn("--concurrency", "2", name="a")``; all are killed at the end."""
    started: list[WorkerProcess] = []

    def start(*argv: str, name: str = "w") -> WorkerProcess:
        worker_id = f"acc-{name}-{uuid.uuid4().hex[:6]}"
        log_path = tmp_path / f"{worker_id}.log"
        env = {
            **os.environ,
            "DATABASE_URL": database_url(worker_id),
            "LEASEJOBS_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, str(MANAGE), "runjobworker", "--worker-id", worker_id, *argv],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        worker = WorkerProcess(worker_id, process, log_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.alive():
            os.kill(worker.pid, signal.SIGCONT)
            worker.process.kill()
        worker.process.wait(timeout=30)


def wait_started(worker: WorkerProcess) -> None:
    wait_for(lambda: "worker.started" in worker.log() or not worker.alive(), what="start")
    assert worker.alive(), worker.log()


def pause(worker: WorkerProcess) -> None:
    """SIGSTOP the worker, at a moment when it does not hold SQLite's write lock.

    SQLite has one write lock per database file: a process paused inside a write would block
    every other process (that is SQLite, not the protocol). PostgreSQL locks rows, and the
    worker's writes are single autocommit statements, so there any moment will do.
    """
    for _ in range(50):
        worker.send(signal.SIGSTOP)
        if connection.vendor != "sqlite" or _write_lock_free(connection.settings_dict["NAME"]):
            return
        worker.send(signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("could not pause the worker outside a write")


def _write_lock_free(path: str) -> bool:
    probe = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now, for servers a test makes of its own."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
