"""A real standby's lag, as the admin shows it: PostgreSQL only, on a pair of its own servers.

The pair is made as the failover test makes its own (tests/acceptance/pg_servers.py:
initdb, then ``pg_basebackup -R`` streaming into a standby on free ports), asynchronous here,
and a project made by ``startproject`` (tests/acceptance/replica_lag.py) keeps its jobs
on the primary and reads through ``replica``, the standby (``LEASEJOBS_READ_DATABASES =
{"default": "replica"}``: the key is the queue database, ``default`` for a project with one).
Replay is paused on the standby (``pg_wal_replay_pause()``), so a job enqueued then is on the
primary only: the admin's list, read on the standby, does not show it and says how far behind
the standby is, too stale past ``LEASEJOBS_READ_MAX_LAG`` (0 here: any lag is too much); the
job's own page, read on the primary, shows it. Replay resumed, the list shows it, 0 s behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from ..invariants import wait_for
from .pg_servers import Pair, Server, server_pair
from .replica_lag import enqueued_unseen, lag_project, seen_caught_up

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's standby: a hot standby's replay lag")


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A primary and a standby streaming from it (asynchronous: replay may fall behind)."""
    with server_pair("leasejobs-replica-", synchronous=False) as made:
        yield made


def caught_up(standby: Server) -> bool:
    with standby.connect() as conn:
        row = conn.execute("SELECT pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()").fetchone()
    return bool(row and row[0])


def test_the_admin_shows_a_standby_s_lag_and_when_it_is_too_stale(
    pair: Pair, tmp_path: Path
) -> None:
    project = lag_project(
        tmp_path / "project",
        pair.primary.settings(),
        pair.standby.settings(),
        "LEASEJOBS_READ_MAX_LAG = 0\n",
    )
    wait_for(lambda: caught_up(pair.standby), what="the standby replaying all it received")

    with pair.standby.connect() as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
    job_id, behind = enqueued_unseen(project)
    for line in (behind["list_said"][0], behind["dashboard_said"][0]):
        assert "Read from the replica replica, " in line, behind
        assert " behind: too stale to trust (over LEASEJOBS_READ_MAX_LAG, 0.0 s)." in line

    with pair.standby.connect() as conn:
        conn.execute("SELECT pg_wal_replay_resume()")
    wait_for(lambda: caught_up(pair.standby), what="the standby replaying all it received")
    current = seen_caught_up(project, job_id)
    assert "too stale" not in current["dashboard_said"][0]
