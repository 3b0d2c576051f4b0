"""A real standby's lag, as the admin shows it: PostgreSQL only, on a pair of its own servers.

The pair is made as tests/acceptance/test_failover.py makes its own (initdb, then
``pg_basebackup -R`` streaming into a standby on free ports, as the ``postgres`` OS user when the
test runs as root), asynchronous here, and a project made by ``startproject`` keeps its jobs
on the primary and reads through ``replica``, the standby (``LEASEJOBS_READ_DATABASES =
{"default": "replica"}``: the key is the queue database, ``default`` for a project with one).
Replay is paused on the standby (``pg_wal_replay_pause()``), so a job enqueued then is on the
primary only: the admin's list, read on the standby, does not show it and says how far behind
the standby is, too stale past ``LEASEJOBS_READ_MAX_LAG`` (0 here: any lag is too much); the
job's own page, read on the primary, shows it. Replay resumed, the list shows it, 0 s behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from ..invariants import wait_for
from ..newproject import NewProject, start_project

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's standby: a hot standby's replay lag")


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
    bindir: Path
    data: Path
    port: int

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

    def settings(self) -> dict[str, Any]:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "leasejobs",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
        }

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(AssertionError):
                self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


@dataclass
class Pair:
    primary: Server
    standby: Server


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A primary and a standby streaming from it (asynchronous: replay may fall behind)."""
    bindir = server_binaries()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (set LEASEJOBS_PG_BIN)")
    top = Path(tempfile.mkdtemp(prefix="leasejobs-replica-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(top, user.pw_uid, user.pw_gid)
    primary_port, standby_port = free_ports(2)
    primary = Server(bindir, top / "primary", primary_port)
    standby = Server(bindir, top / "standby", standby_port)
    try:
        primary.run("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust", "-N")
        with (primary.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {primary.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{top}'\nwal_level = replica\nmax_wal_senders = 4\n"
                "fsync = off\nshared_buffers = 16MB\nmax_connections = 40\n"
            )
        primary.start()
        with primary.connect() as conn:
            conn.execute("CREATE DATABASE leasejobs")
        source = ("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres")
        # A standby (-R), copied after an immediate checkpoint (-c fast), streaming its WAL.
        options = ("-R", "-X", "stream", "-N", "-c", "fast")
        primary.run("pg_basebackup", *source, "-D", str(standby.data), *options)
        with (standby.data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {standby.port}\n")
        standby.start()
        yield Pair(primary, standby)
    finally:
        try:
            for server in (standby, primary):
                server.stop()
        finally:
            shutil.rmtree(top, ignore_errors=True)


PROBE = """
    import json

    from django.contrib.auth.models import User
    from django.test import Client

    from notify.jobs import greet


    def admin():
        boss = User.objects.filter(username="boss").first() or User.objects.create_superuser(
            "boss", "boss@example.com", "pw"
        )
        client = Client(HTTP_HOST="localhost")
        client.force_login(boss)
        return client


    def said(page):
        text = page.content.decode()
        return [line.strip() for line in text.splitlines() if "Read from the replica" in line]


    def enqueue():
        return greet.enqueue("late").pk


    def seen(job_id):
        client = admin()
        listing = client.get("/admin/django_leasejobs/job/")
        change = client.get(f"/admin/django_leasejobs/job/{job_id}/change/")
        dashboard = client.get("/admin/django_leasejobs/job/dashboard/")
        return {
            "listed": f"/admin/django_leasejobs/job/{job_id}/change/" in listing.content.decode(),
            "list_said": said(listing),
            "dashboard_said": said(dashboard),
            "change": change.status_code,
        }


    def show(value):
        print("PROBE " + json.dumps(value))
"""

JOBS = """
    from django_leasejobs import job


    @job
    def greet(name):
        return f"hello {name}"
"""


def probe(project: NewProject, call: str) -> Any:
    done = project.manage("shell", "-c", f"from notify.probe import *; show({call})")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.split("PROBE ", 1)[1])


def caught_up(standby: Server) -> bool:
    with standby.connect() as conn:
        row = conn.execute("SELECT pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()").fetchone()
    return bool(row and row[0])


def test_the_admin_shows_a_standby_s_lag_and_when_it_is_too_stale(
    pair: Pair, tmp_path: Path
) -> None:
    project = start_project(tmp_path / "project", pair.primary.settings())
    app = project.root / "notify"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "jobs.py").write_text(textwrap.dedent(JOBS))
    (app / "probe.py").write_text(textwrap.dedent(PROBE))
    settings = project.root / "shop" / "settings.py"
    settings.write_text(
        settings.read_text()
        + f"DATABASES['replica'] = {pair.standby.settings()!r}\n"
        + "LEASEJOBS_READ_DATABASES = {'default': 'replica'}\n"
        + "LEASEJOBS_READ_MAX_LAG = 0\n"
        + "INSTALLED_APPS += ['notify']\n"
    )
    done = project.manage("migrate")
    assert done.returncode == 0, done.stderr
    probe(project, "admin() and None")  # the superuser, replayed before the pause
    wait_for(lambda: caught_up(pair.standby), what="the standby replaying all it received")

    with pair.standby.connect() as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
    job_id = probe(project, "enqueue()")
    behind = probe(project, f"seen({job_id})")
    assert behind["listed"] is False, behind  # the list read the standby, which has not it
    assert behind["change"] == 200  # the job's page reads the primary
    for line in (behind["list_said"][0], behind["dashboard_said"][0]):
        assert "Read from the replica replica, " in line, behind
        assert " behind: too stale to trust (over LEASEJOBS_READ_MAX_LAG, 0.0 s)." in line

    with pair.standby.connect() as conn:
        conn.execute("SELECT pg_wal_replay_resume()")
    wait_for(lambda: caught_up(pair.standby), what="the standby replaying all it received")
    current = probe(project, f"seen({job_id})")
    assert current["listed"] is True, current
    assert "Read from the replica replica, 0.0 s behind." in current["list_said"][0], current
    assert "too stale" not in current["dashboard_said"][0]
