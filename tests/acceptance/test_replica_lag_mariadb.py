"""A real MariaDB replica's status, as the admin shows it: on a pair of servers of its own.

Two ``mariadbd`` made by ``mariadb-install-db`` in a temporary directory on free ports (as the
``mysql`` OS user when the test runs as root), the second replicating the first's binary log.
The project keeps its jobs on the primary and reads through ``replica``
(``LEASEJOBS_READ_DATABASES = {"default": "replica"}``). With the replica's SQL thread stopped
(``STOP REPLICA SQL_THREAD``), ``Seconds_Behind_Master`` is NULL: a job enqueued then is not in
the admin's list, which says the lag is unknown; the job's own page (the primary) shows it.
Started again and caught up, the list shows it, 0 s behind. MariaDB pass only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from ..invariants import wait_for
from .conftest import free_ports
from .replica_lag import enqueued_unseen, lag_project, seen_caught_up

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _mariadb_only() -> None:
    if connection.vendor != "mysql":
        pytest.skip("MariaDB's replica: SHOW REPLICA STATUS")


@dataclass
class Server:
    data: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    def start(self, *options: str) -> None:
        argv = [
            "mariadbd", "--no-defaults", f"--datadir={self.data}", f"--port={self.port}",
            "--bind-address=127.0.0.1", f"--socket={self.data}.sock",
            f"--pid-file={self.data}.pid", "--innodb-buffer-pool-size=16M",
            "--character-set-server=utf8mb4", *options,
        ]  # fmt: skip
        if os.geteuid() == 0:
            argv.insert(2, "--user=mysql")
        with (self.data.parent / f"{self.data.name}.log").open("w") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.answers(), what=f"mariadbd on port {self.port}")

    def answers(self) -> bool:
        try:
            self.sql("SELECT 1")
        except Exception:
            return False
        return True

    def sql(self, statement: str) -> list[dict[str, Any]]:
        import MySQLdb
        import MySQLdb.cursors

        db = MySQLdb.connect(
            host="127.0.0.1", port=self.port, user="root", cursorclass=MySQLdb.cursors.DictCursor
        )
        try:
            cursor = db.cursor()
            cursor.execute(statement)
            return list(cursor.fetchall())
        finally:
            db.close()

    def settings(self) -> dict[str, Any]:
        return {
            "ENGINE": "django.db.backends.mysql",
            "NAME": "leasejobs",
            "USER": "root",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "OPTIONS": {"charset": "utf8mb4"},
        }

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()  # SIGTERM: a clean shutdown
            self.process.wait(timeout=60)


@dataclass
class Pair:
    primary: Server
    replica: Server


@pytest.fixture
def pair() -> Iterator[Pair]:
    if shutil.which("mariadbd") is None or shutil.which("mariadb-install-db") is None:
        pytest.skip("no MariaDB server binaries")
    top = Path(tempfile.mkdtemp(prefix="leasejobs-mariadb-"))
    if os.geteuid() == 0:
        shutil.chown(top, "mysql", "mysql")
    ports = free_ports(2)
    primary, replica = Server(top / "primary", ports[0]), Server(top / "replica", ports[1])
    try:
        for server in (primary, replica):
            install = ["mariadb-install-db", f"--datadir={server.data}", "--skip-test-db"]
            install.append("--auth-root-authentication-method=normal")  # root over TCP
            if os.geteuid() == 0:
                install.append("--user=mysql")
            subprocess.run(install, check=True, capture_output=True, timeout=120)
        primary.start("--server-id=1", f"--log-bin={primary.data}/bin")
        replica.start("--server-id=2", "--read-only")
        replica.sql(
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
            "MASTER_USER='root', MASTER_PASSWORD='', MASTER_LOG_FILE='bin.000001', "
            "MASTER_LOG_POS=4"
        )
        replica.sql("START REPLICA")
        primary.sql("CREATE DATABASE leasejobs CHARACTER SET utf8mb4")
        yield Pair(primary, replica)
    finally:
        try:
            for server in (replica, primary):
                server.stop()
        finally:
            shutil.rmtree(top, ignore_errors=True)


def caught_up(replica: Server) -> bool:
    status = replica.sql("SHOW REPLICA STATUS")[0]
    return bool(
        status["Slave_SQL_Running"] == "Yes"
        and status["Relay_Master_Log_File"] == status["Master_Log_File"]
        and status["Exec_Master_Log_Pos"] == status["Read_Master_Log_Pos"]
    )


def test_the_admin_shows_a_replica_s_status(pair: Pair, tmp_path: Path) -> None:
    project = lag_project(
        tmp_path / "project",
        pair.primary.settings(),
        pair.replica.settings(),
        "SILENCED_SYSTEM_CHECKS = ['models.W037']\n",
    )
    wait_for(lambda: caught_up(pair.replica), what="the replica applying all it read")

    pair.replica.sql("STOP REPLICA SQL_THREAD")
    job_id, stopped = enqueued_unseen(project)
    for line in (stopped["list_said"][0], stopped["dashboard_said"][0]):
        assert "Read from the replica replica; its lag is unknown (" in line, stopped

    pair.replica.sql("START REPLICA SQL_THREAD")
    wait_for(lambda: caught_up(pair.replica), what="the replica applying all it read")
    seen_caught_up(project, job_id)
