"""PostgreSQL servers of a test's own: a primary and a streaming standby on free ports.

The failover and replica-lag tests each need a pair they may kill, promote or pause without
touching the test run's server. It is made in a temporary directory with the newest installed
server binaries (initdb, then ``pg_basebackup -R``), as the ``postgres`` OS user when the test
runs as root (initdb refuses root), and removed afterwards whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ..invariants import wait_for
from .conftest import free_ports


def server_binaries() -> Path | None:
    """The newest installed PostgreSQL server's bin directory (``LEASEJOBS_PG_BIN`` first)."""
    if os.environ.get("LEASEJOBS_PG_BIN"):
        return Path(os.environ["LEASEJOBS_PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def as_server_user(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: as root, run them as ``postgres``."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


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

    def settings(self) -> dict[str, Any]:
        """Django's ``DATABASES`` entry for the ``leasejobs`` database on this server."""
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "leasejobs",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
        }

    def postmaster(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def kill(self) -> None:
        """``kill -9`` the postmaster, as a crash would; its backends see it gone and exit."""
        pid = self.postmaster()
        self.orphans = [
            int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == pid
        ]
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stopped at once if it runs; the children of a killed postmaster killed too."""
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


@contextlib.contextmanager
def server_pair(prefix: str, *, synchronous: bool) -> Iterator[Pair]:
    """A primary with a ``leasejobs`` database and a standby streaming from it, until the block
    ends. ``synchronous``: through a replication slot, every commit waiting for the standby;
    otherwise asynchronous, so replay may fall behind. Skips the test without server binaries.
    """
    bindir = server_binaries()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (set LEASEJOBS_PG_BIN)")
    top = Path(tempfile.mkdtemp(prefix=prefix))
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
            # would, and no test here crashes the machine.
            conf.write(
                f"port = {primary.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{top}'\nwal_level = replica\nmax_wal_senders = 4\n"
                "fsync = off\nshared_buffers = 16MB\nmax_connections = 40\n"
            )
        primary.start()
        with primary.connect() as conn:
            conn.execute("CREATE DATABASE leasejobs")
        source = ("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres")
        # A standby (-R), copied after an immediate checkpoint (-c fast: the default spread one
        # takes minutes), streaming its WAL; synchronous, through a new slot (-C -S).
        slot = ("-C", "-S", "standby") if synchronous else ()
        options = ("-R", "-X", "stream", *slot, "-N", "-c", "fast")
        primary.run("pg_basebackup", *source, "-D", str(standby.data), *options)
        with (standby.data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {standby.port}\n")
        standby.start()
        if synchronous:
            with primary.connect() as conn:
                # Set after the copy, so that a promoted standby does not wait for a standby
                # of its own.
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
                server.stop()
        finally:
            shutil.rmtree(top, ignore_errors=True)
